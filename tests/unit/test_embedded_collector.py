"""``lcm serve``'s collector settings (``cli.embedded.tune_collector``)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from cli.embedded import GC_THRESHOLDS, tune_collector


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture
def restored() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def test_the_start_is_frozen_and_the_young_collected_less_often(restored: None) -> None:
    assert gc.get_threshold() != GC_THRESHOLDS
    start = Node()  # tracked by the collector, alive at the start
    tune_collector()
    assert gc.get_threshold() == GC_THRESHOLDS
    assert gc.get_freeze_count() > 0
    # What existed then is in no generation a collection walks.
    assert not any(o is start for g in range(3) for o in gc.get_objects(generation=g))


def test_a_cycle_made_after_the_start_is_still_collected(restored: None) -> None:
    tune_collector()
    a, b = Node(), Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    del a, b
    assert gone() is not None  # a cycle: refcounting alone does not free it
    gc.collect()
    assert gone() is None

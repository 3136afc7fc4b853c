"""``lcm serve``'s collector thresholds (``lcm.heap.collect_less_often``)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from lcm.heap import GC_THRESHOLDS, collect_less_often


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture
def restored() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.set_threshold(*thresholds)


def test_the_collections_are_rarer(restored: None) -> None:
    assert gc.get_threshold() != GC_THRESHOLDS
    collect_less_often()
    assert gc.get_threshold() == GC_THRESHOLDS
    assert gc.isenabled()


def test_a_cycle_is_still_collected_without_being_asked(restored: None) -> None:
    collect_less_often()
    a, b = Node(), Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    del a, b
    assert gone() is not None  # a cycle: refcounting alone does not free it
    # No explicit gc.collect(): more new containers than the young
    # generation's threshold, and the collector runs by itself.
    kept: list[list[object]] = [[] for _ in range(GC_THRESHOLDS[0] + 1_000)]
    assert gone() is None
    assert len(kept) > GC_THRESHOLDS[0]

"""The startup heap is frozen once per process."""

from __future__ import annotations

import gc

from lcm.heap import freeze_startup_heap


def test_the_startup_heap_is_frozen_once() -> None:
    freeze_startup_heap()
    frozen = gc.get_freeze_count()
    assert frozen > 0
    later: list[list[int]] = [[] for _ in range(100)]  # a later app's leftovers (tracked)
    freeze_startup_heap()
    assert gc.get_freeze_count() == frozen, "a second call froze objects of later work"
    assert later

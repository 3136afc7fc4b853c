"""Races for tests: one call run from several threads at the same moment."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass
class Raced(Generic[T]):
    """What the racing calls returned (in the order they finished) and what they raised."""

    results: list[T] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)


def race(count: int, call: Callable[[int], T], timeout: float | None = 120) -> Raced[T]:
    """Run ``call(i)`` for each ``i`` below ``count``, each in its own thread.

    A barrier holds every thread until all have started, so the calls
    overlap as much as the machine lets them. A call's exception is
    collected, not raised, for the test to assert on.
    """
    raced: Raced[T] = Raced()
    lock = threading.Lock()  # list.append is atomic in CPython; the lock says so anyway
    start = threading.Barrier(count)

    def run(i: int) -> None:
        try:
            start.wait()
            result = call(i)
        except BaseException as exc:
            with lock:
                raced.errors.append(exc)
            return
        with lock:
            raced.results.append(result)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    return raced

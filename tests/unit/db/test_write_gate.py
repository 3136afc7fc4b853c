"""The in-process write gate: granted in arrival order, bounded waits."""

from __future__ import annotations

import threading
import time

from lcm.db.write_gate import WriteGate


def test_waiters_are_served_in_arrival_order() -> None:
    gate = WriteGate()
    assert gate.acquire(1)
    order: list[int] = []

    def writer(n: int) -> None:
        assert gate.acquire(10)
        order.append(n)
        gate.release()

    threads = []
    for n in range(8):
        thread = threading.Thread(target=writer, args=(n,))
        thread.start()
        threads.append(thread)
        time.sleep(0.02)  # arrive one after the other
    gate.release()
    for thread in threads:
        thread.join(10)
    assert order == list(range(8))


def test_a_releasing_holder_cannot_overtake_a_waiter() -> None:
    """The holder that releases and asks again queues behind whoever was waiting."""
    gate = WriteGate()
    assert gate.acquire(1)
    got: list[str] = []

    def waiter() -> None:
        assert gate.acquire(10)
        got.append("waiter")
        time.sleep(0.05)
        gate.release()

    thread = threading.Thread(target=waiter)
    thread.start()
    time.sleep(0.05)
    gate.release()
    assert gate.acquire(10)
    got.append("holder again")
    gate.release()
    thread.join(10)
    assert got == ["waiter", "holder again"]


def test_a_timed_out_waiter_leaves_the_queue() -> None:
    gate = WriteGate()
    assert gate.acquire(1)
    started = time.monotonic()
    assert not gate.acquire(0.1)
    assert 0.09 <= time.monotonic() - started < 2
    gate.release()
    assert gate.acquire(0.1)  # the abandoned place does not block the next one
    gate.release()

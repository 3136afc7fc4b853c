"""The passes' turn gate (lcm/turns.py): a few at a time, first come first served."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest

from lcm.turns import TurnGate
from tests.concurrency import race

WAIT = 10.0  # seconds a step may take before the test calls it stuck


def wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, "the gate did not get there"
        time.sleep(0.001)


def queue_in_order(gate: TurnGate, count: int, order: list[Any]) -> list[threading.Thread]:
    """Start ``count`` threads that queue for a turn one after another, then record it."""

    def take(n: int) -> None:
        with gate.turn():
            order.append(n)

    threads = []
    for n in range(count):
        thread = threading.Thread(target=take, args=(n,))
        thread.start()
        wait_for(partial(lambda queued: gate.waiting() == queued, n + 1))  # before the next
        threads.append(thread)
    return threads


@pytest.mark.parametrize("slots", [1, 3])
def test_never_more_than_its_slots_hold_a_turn(slots: int) -> None:
    gate = TurnGate(slots)
    lock = threading.Lock()
    holding, peak = 0, 0

    def work(_: int) -> None:
        nonlocal holding, peak
        with gate.turn():
            with lock:
                holding += 1
                peak = max(peak, holding)
            time.sleep(0.02)  # the GIL is released: another thread could slip in
            with lock:
                holding -= 1

    raced = race(24, work)
    assert raced.errors == []
    assert len(raced.results) == 24
    assert peak <= slots
    stats = gate.stats()
    assert stats.turns == 24
    assert stats.waiting == 0
    assert stats.waits >= 1  # 24 threads released at once: some queued


def test_all_slots_can_be_held_at_once() -> None:
    # Three threads that each wait, in their turn, for the other two to hold
    # one too: a gate that admitted fewer than three would break the barrier.
    gate = TurnGate(3)
    together = threading.Barrier(3, timeout=WAIT)

    def work(_: int) -> None:
        with gate.turn():
            together.wait()

    raced = race(3, work)
    assert raced.errors == []


def test_waiters_get_their_turn_in_arrival_order() -> None:
    gate = TurnGate(1)
    order: list[int] = []
    with gate.turn():
        threads = queue_in_order(gate, 6, order)
    for thread in threads:
        thread.join(WAIT)
    assert order == [0, 1, 2, 3, 4, 5]


def test_a_turn_given_back_goes_to_the_oldest_waiter_not_to_a_newcomer() -> None:
    # The holder gives its turn back and asks again at once: it must queue
    # behind the thread that was already waiting (Python's locks and
    # semaphores would let the running thread take it straight back).
    gate = TurnGate(1)
    order: list[int | str] = []
    with gate.turn():
        (waiter,) = queue_in_order(gate, 1, order)
    with gate.turn():
        order.append("holder again")
    waiter.join(WAIT)
    assert order == [0, "holder again"]


def start(target: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=target)
    thread.start()
    return thread


def test_stepping_aside_lets_another_in_and_queues_again_at_the_back() -> None:
    gate = TurnGate(1)
    order: list[str] = []
    aside, stepper_may_return, other_may_finish = (threading.Event() for _ in range(3))

    def stepper() -> None:
        with gate.turn():
            order.append("stepper takes")
            with gate.step_aside():  # what a pass does while the model answers
                aside.set()
                stepper_may_return.wait(WAIT)
            order.append("stepper back")

    def other() -> None:
        with gate.turn():
            order.append("other takes")
            other_may_finish.wait(WAIT)

    def third() -> None:
        with gate.turn():
            order.append("third takes")

    threads = [start(stepper)]
    aside.wait(WAIT)
    threads.append(start(other))
    wait_for(lambda: "other takes" in order)  # the turn stepped away from was free
    threads.append(start(third))
    wait_for(lambda: gate.waiting() == 1)
    stepper_may_return.set()
    wait_for(lambda: gate.waiting() == 2)  # the stepper queues behind the third thread
    other_may_finish.set()
    for thread in threads:
        thread.join(WAIT)
    assert order == ["stepper takes", "other takes", "third takes", "stepper back"]


def test_a_thread_without_a_turn_steps_aside_freely() -> None:
    gate = TurnGate(1)

    def outside() -> None:
        with gate.step_aside():  # an API thread's model call: nothing to give back
            pass

    with gate.turn():
        thread = start(outside)
        thread.join(WAIT)
        assert not thread.is_alive()  # it neither queued nor gave anything back
        assert gate.holds_turn()
    assert gate.stats().turns == 1


def test_a_nested_turn_takes_nothing_more() -> None:
    gate = TurnGate(1)
    with gate.turn():
        with gate.turn():
            assert gate.holds_turn()
        assert gate.holds_turn()
    assert not gate.holds_turn()
    assert gate.stats().turns == 1


def test_a_turn_is_given_back_when_its_block_raises() -> None:
    gate = TurnGate(1)
    with pytest.raises(RuntimeError), gate.turn():
        raise RuntimeError("the pass failed")
    assert not gate.holds_turn()
    taken = threading.Event()

    def take() -> None:
        with gate.turn():
            taken.set()

    start(take).join(WAIT)
    assert taken.is_set()


def test_a_gate_needs_a_slot() -> None:
    with pytest.raises(ValueError, match="at least one slot"):
        TurnGate(0)

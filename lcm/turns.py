"""Turn-taking for a worker process's passes: a few at a time, in arrival order.

A pass is a model call of about a second between two short bursts of Python
work (the claim and read before it, the commit after). A worker process runs
dozens of passes on pool threads, and with a model that answers them all in
about the same time, their replies arrive together. Left to the GIL, those
threads then interleave statement by statement: every one of them finishes
its commit only at the end of the burst, so the next model calls start
together again, and every wave of passes pays the whole burst once more.

Taking turns instead (at most ``slots`` threads do their Python work at once,
the others queue in the order they arrived), the first pass commits after its
own few milliseconds, the next after its own, and so on: the next model calls
go out spread over the burst, the replies come back spread, and the bursts
stop piling up. The same CPU is spent; it is spent in order.

A thread gives its turn up while it waits for the model
(:meth:`TurnGate.step_aside`) and queues again at the back once the reply is
in. It must hold no database transaction then: a thread waiting for its turn
must not hold a lock the thread in its turn could wait for. The compaction
engine calls the model with no transaction open, by design.

What this costs: a thread in its turn that waits for the database keeps its
turn, so a slow statement delays the passes queued behind it (at most by the
statement timeout). Hence more than one slot is allowed, and every thread
that never took a turn (an API request, a large-file summary) is not gated at
all: :meth:`step_aside` is a no-op for it.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class TurnStats:
    """What a gate has done so far (for the worker's metrics)."""

    turns: int  # turns taken
    waits: int  # of those, how many had to queue
    wait_seconds: float  # time spent queued, summed over every wait
    waiting: int  # threads queued right now


class TurnGate:
    """At most ``slots`` threads hold a turn; the others wait first come, first served.

    Thread-safe; one per process (:class:`lcm.services.Services`).
    """

    def __init__(self, slots: int) -> None:
        if slots < 1:
            raise ValueError("a turn gate needs at least one slot")
        self.slots = slots
        # Guards the fields below; held only to read or change them, never
        # while a thread waits for its turn.
        self._lock = threading.Lock()
        self._taken = 0
        self._turns = 0
        self._waits = 0
        self._wait_seconds = 0.0
        # One parked lock per waiting thread, oldest first. A finished turn is
        # handed to the oldest waiter directly (``_taken`` unchanged), so a
        # thread arriving at that moment cannot slip in ahead of it: Python's
        # own locks and semaphores promise no order.
        self._waiting: deque[threading.Lock] = deque()
        self._held = threading.local()

    @contextmanager
    def turn(self) -> Iterator[None]:
        """Hold a turn for the block (re-entrant: a nested ``turn`` takes nothing more)."""
        if self.holds_turn():
            yield
            return
        self._take()
        try:
            yield
        finally:
            self._give_back()

    @contextmanager
    def step_aside(self) -> Iterator[None]:
        """Give the turn up for the block (a wait for the model), queue again after it.

        A no-op for a thread that holds no turn.
        """
        if not self.holds_turn():
            yield
            return
        self._give_back()
        try:
            yield
        finally:
            self._take()

    def holds_turn(self) -> bool:
        return bool(getattr(self._held, "turn", False))

    def waiting(self) -> int:
        """How many threads wait for a turn."""
        with self._lock:
            return len(self._waiting)

    def stats(self) -> TurnStats:
        with self._lock:
            return TurnStats(self._turns, self._waits, self._wait_seconds, len(self._waiting))

    def _take(self) -> None:
        with self._lock:
            self._turns += 1
            # A free slot means no one waits: a turn given back while someone
            # waits goes to them (_give_back) and ``_taken`` stays at ``slots``.
            if self._taken < self.slots:
                self._taken += 1
                self._held.turn = True
                return
            parked = threading.Lock()
            parked.acquire()
            self._waiting.append(parked)
        queued_at = time.monotonic()
        parked.acquire()  # released by _give_back, which passes its slot on to us
        self._held.turn = True
        waited = time.monotonic() - queued_at
        with self._lock:
            self._waits += 1
            self._wait_seconds += waited

    def _give_back(self) -> None:
        self._held.turn = False
        with self._lock:
            if self._waiting:
                self._waiting.popleft().release()
            else:
                self._taken -= 1

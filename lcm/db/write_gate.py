"""First come, first served hand-off of SQLite's write lock inside one process.

SQLite has one write lock per database file, and a writer that finds it taken
does not queue: its busy handler sleeps and polls (1, 2, 5 … then every
100 ms). A writer that commits and begins again at once (a bootstrap going
from one chunk to the next) takes the lock back before the sleepers wake, so
another tenant's one-message write could wait behind chunk after chunk.
Embedded mode is one process (API and worker threads), so its writers queue
here, in arrival order, before ``BEGIN IMMEDIATE``: each waits at most for
the writers that arrived before it. Writers in other processes (an ``lcm
import`` beside ``lcm serve``) still meet SQLite's busy handler.
"""

from __future__ import annotations

import threading
from collections import deque


class WriteGate:
    """A lock granted in request order (a plain ``threading.Lock`` is not fair)."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._held = False
        # One pre-acquired lock per waiting thread; releasing it hands the gate over.
        self._waiters: deque[threading.Lock] = deque()

    def acquire(self, timeout: float) -> bool:
        """Take the gate, waiting behind earlier requests at most ``timeout`` seconds."""
        with self._mutex:
            if not self._held and not self._waiters:
                self._held = True
                return True
            waiter = threading.Lock()
            waiter.acquire()
            self._waiters.append(waiter)
        if waiter.acquire(timeout=max(timeout, 0.0)):
            return True  # release() handed the gate to this thread
        with self._mutex:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
                return False
        # release() handed the gate over between the timeout and the mutex: it is ours.
        return True

    def release(self) -> None:
        with self._mutex:
            if self._waiters:
                # Ownership passes straight to the oldest waiter; the gate stays held.
                self._waiters.popleft().release()
            else:
                self._held = False

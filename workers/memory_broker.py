"""Kombu's in-memory transport, woken by arrivals instead of polled (embedded mode).

Kombu's ``memory://`` consumer sleeps ``polling_interval`` (1 s) whenever its
queues are empty, so every job of embedded mode (each wake-up, each chained
pass, each expand-query) waited up to a second to start. This transport
blocks on a condition that every publish signals, and re-polls at the old
interval only as a safety net.

An acknowledgement or rejection signals only when the channel's prefetch
window was full: then a message may be waiting for the slot it frees.
Otherwise nothing waits for it (the consumer takes a message whenever the
window has room), and signalling every acknowledgement woke the consumer
once more per job, to find the queues empty: under a gateway's load, as
many empty wake-ups as jobs, each a thread switch and a scan of every queue.
"""

from __future__ import annotations

import threading
import time
from queue import Empty
from typing import Any

from kombu.transport import memory

RECHECK_SECONDS = 1.0


class _Arrivals:
    """A counter that moves on every arrival, and a way to wait for it to move."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self.count = 0

    def signal(self) -> None:
        with self._changed:
            self.count += 1
            self._changed.notify_all()

    def wait_past(self, seen: int, timeout: float) -> None:
        with self._changed:
            self._changed.wait_for(lambda: self.count != seen, timeout)


# Shared like kombu's memory queues themselves (a class attribute there):
# publishers and the consumer use different connections of one process.
ARRIVALS = _Arrivals()


class Channel(memory.Channel):
    def _put(self, queue: str, message: Any, **kwargs: Any) -> None:
        super()._put(queue, message, **kwargs)
        ARRIVALS.signal()

    def _put_fanout(self, *args: Any, **kwargs: Any) -> None:
        super()._put_fanout(*args, **kwargs)
        ARRIVALS.signal()

    def basic_ack(self, *args: Any, **kwargs: Any) -> None:
        # Read before the slot frees: a consumer that found the window full
        # and waits has seen no acknowledgement since, so this one is the
        # first after its look and sees the window full too.
        full = not self.qos.can_consume()
        super().basic_ack(*args, **kwargs)
        if full:
            ARRIVALS.signal()

    def basic_reject(self, delivery_tag: Any, requeue: bool = False) -> None:
        full = not self.qos.can_consume()
        super().basic_reject(delivery_tag, requeue=requeue)
        if full or requeue:  # a requeued message is an arrival
            ARRIVALS.signal()


class Transport(memory.Transport):
    Channel = Channel

    # kombu's two base classes declare this differently; this is the virtual one's.
    def drain_events(self, connection: Any, timeout: float | None = None) -> None:  # type: ignore[override]
        deadline = None if timeout is None else time.monotonic() + timeout
        cycle: Any = self.cycle  # kombu's own code: a FairCycle over the channels' queues
        while True:
            seen = ARRIVALS.count  # read before trying: an arrival after it ends the wait
            try:
                cycle.get(self._deliver, timeout=timeout)
                return
            except Empty:
                left = RECHECK_SECONDS if deadline is None else deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError() from None
                ARRIVALS.wait_past(seen, min(left, RECHECK_SECONDS))

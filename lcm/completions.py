"""Wake-ups for threads that wait on work finished by another thread of this process.

A request that waits for a compaction sweep or an expand-query job blocks on
an event keyed by what it waits for (``debt:<conversation id>``,
``task:<job id>``) instead of sleeping in a loop; whoever finishes that work
calls :meth:`Completions.notify` after its transaction committed. A wake-up
is only a hint: the waiter re-reads the truth (the database, the result
backend) when woken and also after a bounded re-check interval, so a lost
wake-up costs latency, never a wrong answer.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


def debt_key(conversation_id: int) -> str:
    """The key notified when a conversation's compaction debt settles (done or failed)."""
    return f"debt:{conversation_id}"


def task_key(task_id: str) -> str:
    """The key notified when a job's result has been stored."""
    return f"task:{task_id}"


class Completions:
    """Keyed wake-ups: :meth:`watch` a key, :meth:`notify` it from the finishing thread."""

    def __init__(self) -> None:
        # Guards the waiter sets only; events are set outside it.
        self._lock = threading.Lock()
        self._waiters: dict[str, set[threading.Event]] = {}

    @contextmanager
    def watch(self, key: str) -> Iterator[threading.Event]:
        """An event set by every :meth:`notify` of ``key`` while the block runs.

        Register before reading the truth: a notify that lands between the
        read and the wait then leaves the event set, so no wake-up is missed.
        """
        event = threading.Event()
        with self._lock:
            self._waiters.setdefault(key, set()).add(event)
        try:
            yield event
        finally:
            with self._lock:
                waiting = self._waiters.get(key)
                if waiting is not None:
                    waiting.discard(event)
                    if not waiting:
                        del self._waiters[key]

    def notify(self, key: str) -> None:
        with self._lock:
            events = list(self._waiters.get(key, ()))
        for event in events:
            event.set()

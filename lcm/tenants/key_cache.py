"""The API keys this process found active lately: no database read per request.

Every request authenticates its key. Read from the database each time, that
is a statement (and on the turn's ``…/messages`` and ``…/turns``, a short
session of its own) per request, about a twentieth of ``lcm serve``'s CPU per
gateway turn. :data:`ACTIVE_KEYS` remembers, per key hash, the principal and
its tenant's stored overrides as last read, for ``LCM_KEY_CACHE_SECONDS``
(default 1 s).

How stale an answer may be:

- in this process, none: a commit that revokes a key, changes a tenant's
  settings or erases a tenant forgets every remembered key once it has
  committed (:func:`forget_keys_on_commit`, called by those writes);
- in another process (another ``lcm api``, a worker, the CLI), up to
  ``LCM_KEY_CACHE_SECONDS`` after that commit: an entry is not used once it
  is that old.

Only active keys are remembered: an unknown or revoked key is read again
each time (the key gate, ``api/key_gate.py``, refuses it before its body).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import Session

KEY_CACHE_MAX = 10_000

Found = tuple[Any, dict[str, Any]]  # (Principal, the tenant's stored overrides)


class KeyCache:
    """Key hash -> what authenticating it found, for a bounded time (module docstring)."""

    def __init__(self, size: int = KEY_CACHE_MAX, clock: Callable[[], float] = time.monotonic):
        self._size = size
        self._clock = clock
        self._entries: dict[str, tuple[float, Found]] = {}
        self._generation = 0
        # Guards generation and entries together: see put().
        self._lock = threading.Lock()

    @property
    def generation(self) -> int:
        """Read before the database is: :meth:`put` takes it back."""
        return self._generation

    def get(self, key_hash: str, ttl: float) -> Found | None:
        entry = self._entries.get(key_hash)
        if entry is None or self._clock() - entry[0] >= ttl:
            return None
        return entry[1]

    def put(self, key_hash: str, found: Found, generation: int) -> None:
        """Remember ``found``, read when the generation was ``generation``.

        A read that began before a revocation committed may end after the
        commit forgot every key; storing what it read would bring the revoked
        key back for a whole TTL. The generation, moved by every
        :meth:`forget`, tells: such a read is not stored. Under the lock, so
        no forget falls between the check and the store.
        """
        with self._lock:
            if generation != self._generation:
                return
            if len(self._entries) >= self._size and key_hash not in self._entries:
                self._entries.pop(next(iter(self._entries)))  # the oldest stored
            self._entries[key_hash] = (self._clock(), found)

    def forget(self) -> None:
        with self._lock:
            self._generation += 1
            self._entries = {}


ACTIVE_KEYS = KeyCache()


def forget_keys_on_commit(session: Session) -> None:
    """Forget every remembered key once ``session``'s transaction commits.

    After the commit, not at the write: forgotten before it, a request could
    read the old row again (the write not yet visible) and remember it.
    """
    event.listen(session, "after_commit", _forget, once=True)


def _forget(_session: Session) -> None:
    ACTIVE_KEYS.forget()

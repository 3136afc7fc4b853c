"""Telling "the database is busy, retry" apart from "the database is down".

A lock wait that ran out (SQLite's busy timeout, a Postgres lock timeout or
deadlock) or a pool with no free connection in time is load, not an outage:
the caller should retry shortly, and operators should not be paged for a
dead database. Everything else an ``OperationalError`` carries (refused
connections, a missing file, a full disk) is an outage.
"""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout

# SQLite primary result codes: SQLITE_BUSY (another connection holds the lock),
# SQLITE_LOCKED (a conflict inside one connection's shared cache).
_SQLITE_BUSY_CODES = {5, 6}
_SQLITE_BUSY_TEXT = ("database is locked", "database table is locked")
# Postgres SQLSTATEs: lock_not_available (lock_timeout, NOWAIT),
# deadlock_detected, serialization_failure: each succeeds when retried.
_POSTGRES_BUSY_STATES = {"55P03", "40P01", "40001"}


def is_busy(exc: BaseException) -> bool:
    """True when ``exc`` means "the database is busy; retrying shortly may succeed"."""
    if isinstance(exc, PoolTimeout):
        return True
    if not isinstance(exc, DBAPIError):
        return False
    orig = exc.orig
    if getattr(orig, "sqlstate", None) in _POSTGRES_BUSY_STATES:
        return True
    code = getattr(orig, "sqlite_errorcode", None)
    if code is not None:
        return (int(code) & 0xFF) in _SQLITE_BUSY_CODES  # extended codes keep the primary below
    return any(text in str(orig) for text in _SQLITE_BUSY_TEXT)

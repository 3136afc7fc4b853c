"""Postgres: a pooled connection is pinged before use only if it sat idle.

SQLAlchemy's ``pool_pre_ping`` sends ``SELECT 1`` on every checkout, so every
transaction paid one round trip more than its statements: a compaction pass
checks out a connection three times (claim, read, commit), and under a full
worker (25 threads on one GIL) each round trip also means waiting to get the
interpreter back. A connection checked in moments ago was working moments
ago; what the ping is for is the one that sat in the pool while the server
restarted or a proxy dropped it. So, as connection pools such as HikariCP do,
only a connection idle for more than ``PING_AFTER_IDLE_SECONDS`` is pinged.

If the server dies within that window, the first statement on a stale
connection fails with a disconnect error; SQLAlchemy then invalidates the
pool's connections, so the next checkout opens a fresh one (a compaction pass
that failed so is retried from its debt row; a request answers 503 once).
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.pool import ConnectionPoolEntry, PoolProxiedConnection

# A connection back in the pool for less than this is used without a ping.
PING_AFTER_IDLE_SECONDS = 5.0

_LAST_USED = "lcm_last_used"  # ConnectionPoolEntry.info key: monotonic time of its checkin


def ping_idle_connections(engine: Engine) -> None:
    """Ping a connection at checkout when it sat idle (instead of ``pool_pre_ping``)."""
    dialect = engine.dialect

    def fresh(_dbapi: Any, entry: ConnectionPoolEntry) -> None:
        entry.info[_LAST_USED] = time.monotonic()  # just connected: nothing to check

    def checkin(_dbapi: Any, entry: ConnectionPoolEntry) -> None:
        entry.info[_LAST_USED] = time.monotonic()

    def checkout(dbapi: Any, entry: ConnectionPoolEntry, _proxy: PoolProxiedConnection) -> None:
        if time.monotonic() - entry.info.get(_LAST_USED, 0.0) < PING_AFTER_IDLE_SECONDS:
            return
        try:
            dialect.do_ping(dbapi)
        except dialect.loaded_dbapi.Error as exc:
            if dialect.is_disconnect(exc, dbapi, None):
                # The pool discards this connection and checks out another
                # (SQLAlchemy's documented way to refuse one at checkout).
                raise DisconnectionError("the pooled connection was dead") from exc
            raise

    event.listen(engine, "connect", fresh)
    event.listen(engine, "checkin", checkin)
    event.listen(engine, "checkout", checkout)

"""SQLite's side of an engine (embedded mode): the pragmas of each connection,
the write gate writers queue at in arrival order, how each transaction
begins (a reader deferred and query-only, a writer ``BEGIN IMMEDIATE``), and
the readers' own pool of connections.
"""

from __future__ import annotations

import contextlib
import sqlite3
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.engine.base import OptionEngine
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.pool import Pool

from lcm.db.write_gate import WriteGate

# Execution option marking the connections of ``Database.read_session()``.
READ_ONLY = "lcm_read_only"
# Connection info key: this connection's transaction holds the write gate.
_HOLDS_GATE = "lcm_holds_write_gate"
# Connection record info key: the ``query_only`` mode last set on this SQLite connection.
_QUERY_ONLY = "lcm_query_only"


def _set_pragmas(dbapi_conn: sqlite3.Connection, busy_timeout_ms: int, cache_mb: int) -> None:
    """A new SQLite connection's settings (every connection: readers' and writers')."""
    # Take transaction control away from the driver so BEGIN is ours.
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    # WAL lets readers run beside the one writer; the busy timeout makes a
    # second writer wait for the lock instead of failing at once.
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA synchronous=NORMAL")
    if cache_mb:
        # SQLite's default page cache (2 MB a connection) stops holding a
        # write's index pages once the file nears 1 GB: a 10 MB bootstrap
        # took 3.6-3.9 s there against 2.8 s at 60 MB, and 2.7-3.5 s at
        # both sizes with 32-64 MB (``python -m bench isolation``).
        cur.execute(f"PRAGMA cache_size=-{int(cache_mb) * 1024}")
    cur.close()


def _begin(conn: Connection, read_only: bool, begin: str) -> None:
    """``begin`` on the ``sqlite3`` connection, its ``query_only`` switched first if needed.

    On the driver, not ``exec_driver_sql``: every transaction of a turn
    (five or six) paid SQLAlchemy's execution layer twice here, ~0.2 ms of
    CPU, around two calls to SQLite of a few µs. The switch is sent only
    when the connection's last transaction was of the other kind, which
    with readers on a pool of their own (:class:`ReaderEngine`) is once in
    a connection's life; the mode is kept on the connection's record, which
    lives exactly as long as the ``sqlite3`` connection it describes. A
    failed ``BEGIN`` (the lock held by another process past the busy
    timeout) is raised as SQLAlchemy's own error, which ``lcm.db.busy``
    reads.
    """
    raw: Any = conn.connection.driver_connection
    info = conn.connection.info
    try:
        if info.get(_QUERY_ONLY) is not read_only:
            info.pop(_QUERY_ONLY, None)  # unknown until the switch is through
            raw.execute("PRAGMA query_only=ON" if read_only else "PRAGMA query_only=OFF")
            info[_QUERY_ONLY] = read_only
        raw.execute(begin)
    except sqlite3.Error as error:
        raise OperationalError(begin, None, error) from error


def configure_sqlite(
    engine: Engine, busy_timeout_ms: int, cache_mb: int, gate: WriteGate | None = None
) -> None:
    """``engine``'s SQLite settings; its writers queue at ``gate`` (a new one by default)."""
    gate = gate or WriteGate()

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: sqlite3.Connection, _record: Any) -> None:
        _set_pragmas(dbapi_conn, busy_timeout_ms, cache_mb)

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        if conn.get_execution_options().get(READ_ONLY):
            # A reader: a deferred BEGIN takes no lock, and in WAL mode it reads
            # a snapshot while the one writer goes on, so it never waits for a
            # writer (nor a writer for it). query_only makes a write slipped
            # into a read session fail loudly instead of upgrading the
            # transaction to a writer mid-way (which can fail with SQLITE_BUSY).
            _begin(conn, True, "BEGIN")
            return
        # A writer queues for the write lock in arrival order (see WriteGate),
        # bounded by the same busy timeout SQLite applies.
        if not gate.acquire(busy_timeout_ms / 1000):
            raise OperationalError(
                "BEGIN IMMEDIATE", None, sqlite3.OperationalError("database is locked")
            )
        conn.info[_HOLDS_GATE] = True
        try:
            # BEGIN IMMEDIATE takes the write lock up front. A deferred BEGIN
            # that reads and then writes can fail with SQLITE_BUSY
            # mid-transaction when another writer got there first (no retry
            # helps); taking the lock at the start turns that into a wait
            # bounded by busy_timeout. Write transactions are kept short (a
            # bootstrap commits in chunks), so serializing them costs little.
            _begin(conn, False, "BEGIN IMMEDIATE")
        except BaseException:
            _release(conn)  # no transaction began: no commit or rollback will follow
            raise

    def _release(conn: Connection) -> None:
        _release_gate(conn, gate)

    event.listen(engine, "commit", lambda conn: _end_writer(conn, "COMMIT", gate))
    event.listen(engine, "rollback", lambda conn: _end_writer(conn, "ROLLBACK", gate))


def _release_gate(conn: Connection, gate: WriteGate) -> None:
    # Once per transaction: the mark is taken off as the gate is released.
    if conn.info.pop(_HOLDS_GATE, False):
        gate.release()


def _end_writer(conn: Connection, end: str, gate: WriteGate) -> None:
    """A writer's COMMIT or ROLLBACK sent here, then the gate released.

    SQLAlchemy fires its ``commit`` and ``rollback`` events just *before*
    it ends the transaction. Released there, the gate went to the next
    writer while this one's COMMIT still held SQLite's lock (the driver lets
    other threads run while it writes the log): that writer's ``BEGIN
    IMMEDIATE`` met the lock, and SQLite's busy handler put it to sleep
    (1 ms, 2 ms, 5 ms ...) holding the gate, every writer behind it waiting
    too. Ended here, the lock is free when the gate passes on; the driver's
    own COMMIT / ROLLBACK that SQLAlchemy sends next finds no transaction
    and does nothing. A reader's transaction (no gate) is left to SQLAlchemy.
    """
    if not conn.info.get(_HOLDS_GATE):
        return
    try:
        if not conn.invalidated:
            raw: Any = conn.connection.driver_connection
            _send_end(raw, end)
    finally:
        _release_gate(conn, gate)


def _send_end(raw: sqlite3.Connection, end: str) -> None:
    """``end`` (COMMIT or ROLLBACK) on the driver; a failed COMMIT raised as SQLAlchemy's error.

    A failed COMMIT (a deferred foreign key broken, a full disk) leaves the
    transaction open: it is rolled back here, before the gate passes on, and
    raised as the error SQLAlchemy would have raised for it. A failed
    ROLLBACK is not raised: SQLAlchemy's own ROLLBACK follows and meets (and
    handles) whatever broke the connection.
    """
    try:
        raw.execute(end)
    except sqlite3.Error as error:
        if end == "ROLLBACK":
            return
        if raw.in_transaction:
            # A broken connection fails here too: the error raised below lets the pool drop it.
            with contextlib.suppress(sqlite3.Error):
                raw.execute("ROLLBACK")
        raise DBAPIError.instance(end, None, error, sqlite3.Error) from error


class ReaderEngine(OptionEngine):
    """``proxied`` marked :data:`READ_ONLY`, on a pool of connections of its own.

    Setting ``query_only`` (like any of SQLite's flag pragmas) expires every
    statement the connection has prepared, so the next run of each one is
    compiled again: when readers and writers took turns on the same
    connections, nearly every statement of a turn was, at 3-10 times the
    cost of running it (~2 ms of CPU a gateway turn, in process). Readers
    here never get a writer's connection, nor writers a reader's, so a
    connection's mode is set once. Everything else is ``proxied``'s: its
    events (the pragmas of a new connection, how a transaction begins, any
    listener added later), its dialect and its statement cache; the pool is
    a copy of its pool (same size, same connection events).
    """

    def __init__(self, proxied: Engine) -> None:
        super().__init__(proxied, {READ_ONLY: True})
        self._readers_pool = proxied.pool.recreate()

    # OptionEngine reads and sets its parent's pool; this engine keeps its own
    # (``dispose()`` replaces it through the setter).
    @property
    def pool(self) -> Pool:
        return self._readers_pool

    @pool.setter
    def pool(self, pool: Pool) -> None:
        self._readers_pool = pool

"""Engines and sessions for Postgres (scaled) and SQLite (embedded).

The caller that owns a session (an API request, a Celery task, a CLI command)
commits; nothing in the domain does. ``Database.session()`` rolls back unless
the owner committed. ``Database.read_session()`` is for work that only reads:
on SQLite it never takes the database's one write lock, so a reader is never
queued behind another tenant's writer.
"""

from __future__ import annotations

import logging
import select
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.orm import Session, sessionmaker

from lcm.db.driver import compile_all
from lcm.db.sqlite_setup import READ_ONLY, ReaderEngine, configure_sqlite
from lcm.message_cache import MESSAGE_CACHE, MessageCache
from lcm.outbox import JobSender, drop_jobs, take_jobs
from lcm.semantic_settings import SEMANTIC_ON
from lcm.settings import Settings
from lcm.window_cache import ONE_SNAPSHOT, WINDOW_CACHE, WindowCache

log = logging.getLogger(__name__)

Transaction = Callable[[], AbstractContextManager[Session]]
"""Opens a unit of work (``Database.transaction``, ``Database.read_session``, ...).

What the domain receives instead of a :class:`Database`: it opens short
transactions of its own (one per pass step, one per tool call) and never
holds one across an LLM call.
"""


def normalize_url(url: str) -> str:
    """Pin the driver: ``postgresql://`` means psycopg 3 here."""
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


def ensure_sqlite_directory(url: str) -> None:
    """Create the directory of a SQLite file URL (first start of embedded mode)."""
    parsed = make_url(url)
    if parsed.drivername.startswith("sqlite") and parsed.database not in (None, "", ":memory:"):
        Path(str(parsed.database)).parent.mkdir(parents=True, exist_ok=True)


def make_engine(settings: Settings) -> Engine:
    url = normalize_url(settings.database_url)
    if url.startswith("sqlite"):
        ensure_sqlite_directory(url)
        engine = create_engine(
            url,
            connect_args={
                "check_same_thread": False,
                "timeout": settings.sqlite_busy_timeout_ms / 1000,
            },
            # Readers run side by side (WAL), so every thread that needs a
            # connection gets one: the API's thread pool and the worker's
            # threads already bound how many exist, and a second queue in
            # front of SQLite would only turn bursts of reads (48 greps at
            # once) into pool timeouts. A SQLite connection is a file handle,
            # cheap to open; connections beyond pool_size close when returned.
            pool_size=settings.db_pool_size,
            max_overflow=-1,
        )
        configure_sqlite(engine, settings.sqlite_busy_timeout_ms, settings.sqlite_cache_mb)
        return engine
    engine = create_engine(
        url,
        pool_size=settings.db_pool_size,
        max_overflow=settings.db_max_overflow,
        connect_args=postgres_connect_args(settings.db_prepared_statements),
    )
    event.listen(engine, "checkout", _refuse_closed_connection)
    return engine


def postgres_connect_args(prepared_statements: bool) -> dict[str, Any]:
    """psycopg's connection arguments: without server-side prepared statements if asked.

    psycopg prepares a statement on the server once it has run five times on
    a connection, and runs it by name from then on. A pooler in transaction
    mode (PgBouncer) hands each transaction of one client connection to
    whichever server session is free: unless the pooler tracks prepared
    statements itself (PgBouncer 1.22 and later, with
    ``max_prepared_statements`` above 0; 1.21 tracks them but not the
    ``DEALLOCATE ALL`` psycopg sends after a rollback), the name is missing
    in that session, or already taken there by another client's statement.
    """
    return {} if prepared_statements else {"prepare_threshold": None}


def _refuse_closed_connection(dbapi_conn: Any, _record: Any, _proxy: Any) -> None:
    """Checkout check: a pooled connection the server has closed is replaced, not used.

    When Postgres restarts or ends a backend (``pg_terminate_backend``, an
    idle timeout, a proxy), it sends its last message and closes the socket,
    so an idle connection's socket turns readable; a healthy idle connection
    has nothing to read. Polling the socket costs a system call, where
    SQLAlchemy's ``pool_pre_ping`` costs a ``SELECT 1`` round trip on every
    checkout (five per gateway turn). On ``DisconnectionError`` the pool
    discards the connection and checks out another (a fresh one if needed).
    A connection cut without a word (a silent network loss) shows neither
    way: its first statement fails and the pool discards it then.
    """
    if dbapi_conn.closed or _readable(dbapi_conn.fileno()):
        raise DisconnectionError("the server closed this pooled connection")


def _readable(fd: int) -> bool:
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))


def _commit_if_active(session: Session) -> None:
    """End a read session's transaction with COMMIT, unless a statement failed in it.

    A failed statement leaves the transaction needing a rollback, which
    ``close()`` does.
    """
    transaction = session.get_transaction()
    if transaction is not None and transaction.is_active:
        session.commit()


def _reading_engines(engine: Engine) -> tuple[Engine, Engine]:
    """What read sessions and lookup sessions run on.

    SQLite: connections of their own (:class:`ReaderEngine`), which stay
    query_only: one switched between readers and writers compiled its
    statements again at every switch. Postgres: the same pool, each read
    transaction READ ONLY (a flag on the driver's connection, no extra round
    trip): a write slipped into a read session fails loudly, as query_only
    makes it on SQLite, so ending one with COMMIT (see
    ``Database.read_session``) can never keep a stray write. A lookup runs
    in autocommit there (a flag too, reset when the connection goes back to
    the pool).
    """
    if engine.dialect.name != "postgresql":
        readers = ReaderEngine(engine)
        return readers, readers
    return (
        engine.execution_options(**{READ_ONLY: True, "postgresql_readonly": True}),
        engine.execution_options(**{READ_ONLY: True, "isolation_level": "AUTOCOMMIT"}),
    )


class Database:
    """An engine plus a session factory; one per process.

    ``sender`` is set by the process's composition root: each session's outbox
    (``lcm/outbox.py``) goes to it right after that session commits, and is
    dropped when it rolls back.
    """

    def __init__(self, settings: Settings, sender: JobSender | None = None) -> None:
        self.settings = settings
        self.sender = sender
        self.engine = make_engine(settings)
        # Views are cached by message id: neither backend gives an id twice
        # (a Postgres sequence; AUTOINCREMENT on SQLite, migration 0024).
        self.message_cache = (
            MessageCache(settings.message_cache_size) if settings.message_cache_size > 0 else None
        )
        # The newest windows assembly read, by conversation, each valid while
        # its context version stands (lcm/window_cache.py).
        self.window_cache = (
            WindowCache(settings.window_cache_size) if settings.window_cache_size > 0 else None
        )
        info: dict[str, Any] = {}
        if self.message_cache is not None:
            info[MESSAGE_CACHE] = self.message_cache
        if self.window_cache is not None:
            info[WINDOW_CACHE] = self.window_cache
        if settings.semantic:
            info[SEMANTIC_ON] = True
        self._sessions = sessionmaker(
            self.engine, expire_on_commit=False, autoflush=False, info=info
        )
        event.listen(self._sessions, "after_commit", self._send_outbox)
        event.listen(self._sessions, "after_rollback", drop_jobs)
        readers, lookups = _reading_engines(self.engine)
        # SQLite's readers' pool, disposed with the writers'.
        self.readers = readers if isinstance(readers, ReaderEngine) else None
        self._read_sessions = sessionmaker(
            readers, expire_on_commit=False, autoflush=False, info=info
        )
        self._lookups = sessionmaker(lookups, expire_on_commit=False, autoflush=False, info=info)

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session that rolls back on exit unless its owner committed."""
        session = self._sessions()
        try:
            yield session
        finally:
            # close() rolls back whatever was not committed and detaches the
            # objects without expiring them, so values read stay readable.
            session.close()

    @contextmanager
    def read_session(self) -> Iterator[Session]:
        """A session for work that only reads; it refuses writes.

        On SQLite it begins DEFERRED (a snapshot, no write lock); on
        Postgres it is a READ ONLY transaction (readers never wait for
        writers there). A block that exits cleanly ends it with COMMIT, one
        that raises with ROLLBACK. For a transaction that wrote nothing
        the two are the same, except that psycopg forgets every statement
        it had prepared on the connection at a ROLLBACK (and sends
        ``DEALLOCATE ALL``): read sessions ending in ROLLBACK kept the hot
        queries from ever staying prepared.
        """
        session = self._read_sessions()
        try:
            yield session
            _commit_if_active(session)
        finally:
            session.close()

    @contextmanager
    def lookup_session(self) -> Iterator[Session]:
        """A read session whose statements each stand alone (a key lookup, a context read).

        On Postgres each statement runs in autocommit: one statement is a
        transaction of its own there, so BEGIN and COMMIT would only add two
        round trips. It sees what a READ COMMITTED transaction would (a
        snapshot per statement): use it where no two of its reads need to
        agree more than that. Nothing guards against a write here, as READ
        ONLY does in :meth:`read_session`: SELECTs only. On SQLite it is a
        :meth:`read_session` (a local BEGIN costs nothing).
        """
        session = self._lookups()
        try:
            yield session
            _commit_if_active(session)
        finally:
            session.close()

    @contextmanager
    def snapshot_session(self) -> Iterator[Session]:
        """A read session that sees one snapshot for its whole life (long, consistent reads).

        SQLite's read transaction already is one; on Postgres the default
        (READ COMMITTED) takes a new snapshot per statement, so this asks for
        REPEATABLE READ, under which a read-only transaction never fails.
        The session is marked :data:`lcm.window_cache.ONE_SNAPSHOT` (a read
        repeated in it needs no second statement).
        """
        with self.read_session() as session:
            if self.dialect == "postgresql":
                session.connection(execution_options={"isolation_level": "REPEATABLE READ"})
            session.info[ONE_SNAPSHOT] = True
            yield session

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        """A unit of work for an entrypoint: commits if the block exits cleanly.

        Entry points (tasks, requests, commands) hand this to domain code that
        runs several short transactions of its own, e.g. a compaction pass
        that must not hold one open across an LLM call.
        """
        with self.session() as session:
            yield session
            session.commit()

    def _send_outbox(self, session: Session) -> None:
        jobs = take_jobs(session)
        if not jobs:
            return
        if self.sender is None:
            # Nothing is lost: the debt and large_files rows are committed and
            # the reconcilers resend what they owe; only latency is.
            log.info("no job sender here: %d job(s) left to the reconcilers", len(jobs))
            return
        self.sender.send(jobs)

    def compile_statements(self) -> int:
        """Compile the hot statements for this database now (``lcm.db.driver``); how many.

        A process's start calls it, so that no request or pass pays for it.
        """
        return compile_all(self.engine.dialect)

    def ping(self) -> None:
        """One round trip to the database (readiness checks); raises if it is unreachable."""
        with self.read_session() as session:
            session.execute(text("SELECT 1"))

    def dispose(self) -> None:
        self.engine.dispose()
        if self.readers is not None:
            self.readers.dispose()

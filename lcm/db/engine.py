"""Engines and sessions for Postgres (scaled) and SQLite (embedded).

The caller that owns a session (an API request, a Celery task, a CLI command)
commits; nothing in the domain does. ``Database.session()`` rolls back unless
the owner committed.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.orm import Session, sessionmaker

from lcm.settings import Settings


def normalize_url(url: str) -> str:
    """Pin the driver: ``postgresql://`` means psycopg 3 here."""
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


def _configure_sqlite(engine: Engine, busy_timeout_ms: int) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: sqlite3.Connection, _record: Any) -> None:
        # Take transaction control away from the driver so BEGIN is ours.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        # WAL lets readers run beside the one writer; the busy timeout makes a
        # second writer wait for the lock instead of failing at once.
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        # BEGIN IMMEDIATE takes the write lock up front. A deferred BEGIN that
        # reads and then writes can fail with SQLITE_BUSY mid-transaction when
        # another writer got there first (no retry helps); taking the lock at
        # the start turns that into a wait bounded by busy_timeout. Writes are
        # short, so serializing them costs little in embedded mode.
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def ensure_sqlite_directory(url: str) -> None:
    """Create the directory of a SQLite file URL (first start of embedded mode)."""
    parsed = make_url(url)
    if parsed.drivername.startswith("sqlite") and parsed.database not in (None, "", ":memory:"):
        Path(str(parsed.database)).parent.mkdir(parents=True, exist_ok=True)


def make_engine(settings: Settings) -> Engine:
    url = normalize_url(settings.database_url)
    if url.startswith("sqlite"):
        ensure_sqlite_directory(url)
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
        _configure_sqlite(engine, settings.sqlite_busy_timeout_ms)
        return engine
    return create_engine(
        url,
        pool_size=settings.db_pool_size,
        max_overflow=settings.db_max_overflow,
        pool_pre_ping=True,
    )


class Database:
    """An engine plus a session factory; one per process."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.engine = make_engine(settings)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False, autoflush=False)

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
    def transaction(self) -> Iterator[Session]:
        """A unit of work for an entrypoint: commits if the block exits cleanly.

        Entry points (tasks, requests, commands) hand this to domain code that
        runs several short transactions of its own, e.g. a compaction pass
        that must not hold one open across an LLM call.
        """
        with self.session() as session:
            yield session
            session.commit()

    def dispose(self) -> None:
        self.engine.dispose()

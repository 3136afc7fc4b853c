"""SQLite's readers run on connections of their own, so ``query_only`` is set once per connection.

Setting the pragma expires every statement the connection has prepared:
readers and writers taking turns on one connection compiled their
statements again at every turn (``lcm.db.sqlite_setup.ReaderEngine``).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import OperationalError

from lcm.db.engine import Database
from tests.conftest import settings_for


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Database]:
    db = Database(settings_for(f"sqlite:///{tmp_path / 'r.db'}"))
    with db.transaction() as session:
        session.execute(text("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)"))
    yield db
    db.dispose()


def _raw(session: Any) -> sqlite3.Connection:
    raw: sqlite3.Connection = session.connection().connection.driver_connection
    return raw


def test_readers_and_writers_never_share_a_connection(database: Database) -> None:
    """Reads, lookups, snapshots and writes taking turns, from several threads at once."""
    pragmas: list[tuple[int, str]] = []

    def trace(dbapi_conn: sqlite3.Connection, _record: Any) -> None:
        dbapi_conn.set_trace_callback(
            lambda sql: pragmas.append((id(dbapi_conn), sql)) if "query_only" in sql else None
        )

    event.listen(database.engine, "connect", trace)
    database.dispose()  # the fixture's connection was opened before the listener
    readers: set[int] = set()
    writers: set[int] = set()
    lock = threading.Lock()

    def take_turns(thread: int) -> None:
        for n in range(15):
            with database.transaction() as session:
                session.execute(
                    text("INSERT INTO notes (body) VALUES (:b)"), {"b": f"{thread}-{n}"}
                )
                with lock:
                    writers.add(id(_raw(session)))
            for opened in (
                database.read_session,
                database.lookup_session,
                database.snapshot_session,
            ):
                with opened() as session:
                    session.execute(text("SELECT count(*) FROM notes")).scalar()
                    with lock:
                        readers.add(id(_raw(session)))

    threads = [threading.Thread(target=take_turns, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert readers
    assert writers
    assert not readers & writers
    # The pragma went to each connection once, however many transactions it ran.
    per_connection = [conn for conn, _ in pragmas]
    assert len(per_connection) == len(set(per_connection))
    assert {conn for conn, sql in pragmas if sql.endswith("ON")} <= readers
    with database.read_session() as session:
        assert session.execute(text("SELECT count(*) FROM notes")).scalar() == 60


def test_a_write_in_a_read_session_still_fails_and_leaves_nothing(database: Database) -> None:
    with pytest.raises(OperationalError, match="readonly"), database.read_session() as session:
        session.execute(text("INSERT INTO notes (body) VALUES ('stray')"))
    with database.transaction() as session:
        session.execute(text("INSERT INTO notes (body) VALUES ('kept')"))
    with database.lookup_session() as session:
        assert session.execute(text("SELECT body FROM notes")).scalars().all() == ["kept"]


def test_a_reader_sees_what_a_writer_committed_at_once(database: Database) -> None:
    with database.read_session() as session:
        assert session.execute(text("SELECT count(*) FROM notes")).scalar() == 0
    for n in range(1, 4):
        with database.transaction() as session:
            session.execute(text("INSERT INTO notes (body) VALUES ('x')"))
        with database.read_session() as session:
            assert session.execute(text("SELECT count(*) FROM notes")).scalar() == n


def test_dispose_closes_the_readers_connections_too(database: Database) -> None:
    with database.read_session() as session:
        reader = _raw(session)
    with database.transaction() as session:
        writer = _raw(session)
    database.dispose()
    for closed in (reader, writer):
        with pytest.raises(sqlite3.ProgrammingError, match="closed"):
            closed.execute("SELECT 1")

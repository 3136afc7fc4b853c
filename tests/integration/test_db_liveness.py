"""Postgres: pooled connections are pinged only after sitting idle (lcm/db/liveness.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from lcm.db import liveness
from lcm.db.engine import Database
from tests.conftest import settings_for
from tests.servers import PostgresHandle


@pytest.fixture
def pings(pg_db: Database) -> Iterator[list[int]]:
    """Counts the pings ``pg_db``'s pool sends."""
    dialect = pg_db.engine.dialect
    original = dialect.do_ping
    sent: list[int] = []

    def counted(dbapi_connection: Any) -> bool:
        sent.append(1)
        return bool(original(dbapi_connection))

    dialect.do_ping = counted  # type: ignore[method-assign]
    yield sent
    dialect.do_ping = original  # type: ignore[method-assign]


def _select_one(db: Database) -> int:
    with db.transaction() as session:
        return int(session.execute(text("SELECT 1")).scalar_one())


def test_a_connection_back_moments_ago_is_used_without_a_ping(
    pg_db: Database, pings: list[int]
) -> None:
    for _ in range(10):
        assert _select_one(pg_db) == 1
    assert pings == []


def test_an_idle_connection_is_pinged_and_a_dead_one_replaced(
    pg_server: PostgresHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pool's connection dies while idle; the next checkout pings it, drops it, reconnects."""
    db = Database(settings_for(pg_server.url))
    try:
        with db.transaction() as session:
            pid = session.execute(text("SELECT pg_backend_pid()")).scalar_one()
        with psycopg.connect(pg_server.admin_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", [pid])
        # Every connection now counts as idle: the checkout pings.
        monkeypatch.setattr(liveness, "PING_AFTER_IDLE_SECONDS", 0.0)
        with db.transaction() as session:
            assert session.execute(text("SELECT pg_backend_pid()")).scalar_one() != pid
    finally:
        db.dispose()


def test_a_connection_that_died_within_the_window_fails_once_then_the_pool_reconnects(
    pg_server: PostgresHandle,
) -> None:
    """Not pinged (it was used moments ago): its statement fails, the next transaction works."""
    db = Database(settings_for(pg_server.url))
    try:
        with db.transaction() as session:
            pid = session.execute(text("SELECT pg_backend_pid()")).scalar_one()
        with psycopg.connect(pg_server.admin_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", [pid])
        with pytest.raises(OperationalError), db.transaction() as session:
            session.execute(text("SELECT 1"))
        with db.transaction() as session:
            assert session.execute(text("SELECT pg_backend_pid()")).scalar_one() != pid
    finally:
        db.dispose()

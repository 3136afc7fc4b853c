"""Pooled Postgres connections the server has closed are replaced at checkout, unseen."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from lcm.db.engine import Database
from tests.conftest import settings_for


def backend_of(open_session: Callable[[], AbstractContextManager[Session]]) -> int:
    with open_session() as session:
        pid = session.scalar(text("SELECT pg_backend_pid()"))
    assert isinstance(pid, int)
    return pid


def terminate(db: Database, pids: set[int]) -> None:
    """End the backends as a restart or an idle timeout would, and wait until they are gone."""
    with db.engine.connect() as admin:
        for pid in pids:
            admin.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid})
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            alive = admin.execute(
                text("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(:p)"),
                {"p": list(pids)},
            ).scalar()
            if not alive:
                return
            time.sleep(0.02)
    raise AssertionError(f"backends {pids} still running")


@pytest.mark.parametrize("unit", ["read_session", "transaction", "lookup_session"])
def test_a_connection_the_server_closed_is_replaced_at_checkout(pg_db: Database, unit: str) -> None:
    pooled = Database(settings_for(pg_db.settings.database_url, db_pool_size=1))
    try:
        open_session = getattr(pooled, unit)
        before = backend_of(open_session)
        assert backend_of(open_session) == before  # the pool hands the same connection back
        terminate(pg_db, {before})
        after = backend_of(open_session)  # would fail: "terminating connection …"
        assert after != before
    finally:
        pooled.dispose()

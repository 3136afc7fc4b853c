"""A lock the database cannot grant in time is 503 ``database_busy`` + Retry-After; reads go on."""

from __future__ import annotations

import shutil
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, select, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from lcm.db.busy import is_busy
from lcm.db.engine import Database, normalize_url
from lcm.db.models import Tenant
from lcm.tenants.service import IssuedKey, create_tenant
from tests import servers
from tests.conftest import RecordingSender, auth, settings_for

BUSY_TIMEOUT_MS = 200


@pytest.fixture
def busy_db(tmp_path: Path, sqlite_template: Path) -> Iterator[Database]:
    """SQLite with a tiny busy timeout, so a held write lock times out quickly."""
    path = tmp_path / "lcm.db"
    shutil.copyfile(sqlite_template, path)
    database = Database(settings_for(f"sqlite:///{path}", sqlite_busy_timeout_ms=BUSY_TIMEOUT_MS))
    yield database
    database.dispose()


@pytest.fixture
def busy_client(busy_db: Database) -> Iterator[TestClient]:
    from api.app import create_app
    from workers.link import CeleryLink

    app = create_app(
        busy_db.settings,
        link=CeleryLink(),
        database=busy_db,
        broker_ping=lambda: True,
        sender=RecordingSender(),
    )
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


@pytest.fixture
def issued(busy_db: Database) -> IssuedKey:
    with busy_db.session() as session:
        key = create_tenant(session, "acme")
        session.commit()
    return key


def one_message(n: int) -> dict[str, object]:
    return {"messages": [{"role": "user", "content": f"ledger line {n}", "id": f"m{n}"}]}


def assert_busy(response: Any) -> None:
    """``response``: an httpx response (the test client's or a real client's)."""
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "1"
    assert response.json()["error"]["code"] == "database_busy"


def test_a_write_lock_held_by_another_process_is_database_busy_and_reads_go_on(
    busy_db: Database, busy_client: TestClient, issued: IssuedKey
) -> None:
    url = "/v1/conversations/k/messages"
    assert busy_client.post(url, headers=auth(issued), json=one_message(1)).status_code == 200
    path = busy_db.engine.url.database
    assert path is not None
    other = sqlite3.connect(path, isolation_level=None)  # e.g. `lcm import` beside `lcm serve`
    other.execute("BEGIN IMMEDIATE")
    try:
        assert_busy(busy_client.post(url, headers=auth(issued), json=one_message(2)))
        # Readers take no write lock: they answer while the writer is stuck.
        status = busy_client.get("/v1/conversations/k/status", headers=auth(issued))
        assert status.status_code == 200
        assert status.json()["messages"] == 1
        grep = busy_client.post(
            "/v1/grep", headers=auth(issued), json={"pattern": "ledger", "session_key": "k"}
        )
        assert grep.status_code == 200
        assert len(grep.json()["matches"]) == 1
        assembled = busy_client.post(
            "/v1/conversations/k/assemble", headers=auth(issued), json={"token_budget": 1000}
        )
        assert assembled.status_code == 200
        assert busy_client.get("/v1/tenant/settings", headers=auth(issued)).status_code == 200
    finally:
        other.rollback()
        other.close()
    assert busy_client.post(url, headers=auth(issued), json=one_message(2)).status_code == 200


def test_a_writer_of_this_process_holding_the_lock_too_long_is_database_busy(
    busy_db: Database, busy_client: TestClient, issued: IssuedKey
) -> None:
    """The in-process queue in front of the write lock gives up after the busy timeout too."""
    holding, done = threading.Event(), threading.Event()

    def hold() -> None:
        with busy_db.transaction() as session:
            session.execute(text("SELECT 1"))  # BEGIN IMMEDIATE: the write lock is ours
            holding.set()
            done.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(10)
        response = busy_client.post(
            "/v1/conversations/k/messages", headers=auth(issued), json=one_message(1)
        )
        assert_busy(response)
    finally:
        done.set()
        holder.join(10)
    response = busy_client.post(
        "/v1/conversations/k/messages", headers=auth(issued), json=one_message(1)
    )
    assert response.status_code == 200, response.text


def test_a_read_session_refuses_to_write(busy_db: Database) -> None:
    with busy_db.read_session() as session:
        session.add(Tenant(id="t_x", name="x", settings_overrides={}))
        with pytest.raises(OperationalError, match="readonly"):
            session.flush()


def test_readers_and_writers_taking_turns_each_keep_their_own_connection(
    tmp_path: Path, sqlite_template: Path
) -> None:
    """Readers and writers alternate: each reader refuses to write, each writer writes.

    With a pool of one connection each, a reader, two writers, two readers
    and a writer in turn use two ``sqlite3`` connections in all: a reader's
    never serves a writer (switching ``query_only`` on a connection would
    make SQLite compile its statements again), and each reader, even right
    after a writer and right after another reader, refuses to write.
    """
    path = tmp_path / "lcm.db"
    shutil.copyfile(sqlite_template, path)
    db = Database(settings_for(f"sqlite:///{path}", db_pool_size=1))
    readers: set[int] = set()
    writers: set[int] = set()

    def refuses(n: int) -> None:
        with db.read_session() as session:
            readers.add(id(session.connection().connection.driver_connection))
            session.add(Tenant(id=f"t_r{n}", name=f"switch {n}", settings_overrides={}))
            with pytest.raises(OperationalError, match="readonly"):
                session.flush()

    def writes(n: int) -> None:
        with db.transaction() as session:
            writers.add(id(session.connection().connection.driver_connection))
            session.add(Tenant(id=f"t_w{n}", name=f"switch {n}", settings_overrides={}))

    try:
        for step, n in zip("rwwrrw", range(6), strict=True):
            refuses(n) if step == "r" else writes(n)
        with db.read_session() as session:
            names = set(session.scalars(select(Tenant.id).where(Tenant.name.like("switch %"))))
    finally:
        db.dispose()
    assert names == {"t_w1", "t_w2", "t_w5"}
    assert len(readers) == 1
    assert len(writers) == 1
    assert not readers & writers


def test_postgres_lock_timeouts_are_busy_and_outages_are_not(pg_db: Database) -> None:
    with pg_db.session() as session:
        create_tenant(session, "acme")
        session.commit()
    with pg_db.engine.connect() as holder, pg_db.engine.connect() as waiter:
        holder.execute(select(Tenant).with_for_update())
        waiter.execute(text("SET lock_timeout = '50ms'"))
        with pytest.raises(OperationalError) as caught:
            waiter.execute(select(Tenant).with_for_update())
        holder.rollback()
    assert is_busy(caught.value)
    assert is_busy(PoolTimeout("QueuePool limit reached"))
    refused = create_engine(normalize_url(f"postgresql://nobody@127.0.0.1:{servers.free_port()}/x"))
    with pytest.raises(OperationalError) as down:
        refused.connect()
    assert not is_busy(down.value)

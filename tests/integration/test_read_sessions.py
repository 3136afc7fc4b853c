"""Read sessions: they refuse writes, end with COMMIT, keep prepared statements; lookups."""

from __future__ import annotations

from typing import Any

import pytest
from psycopg.pq import TransactionStatus
from sqlalchemy import event, select, text
from sqlalchemy.exc import DBAPIError

from lcm.compaction.repository import CompactionRepository
from lcm.db.engine import Database
from lcm.db.models import Tenant
from lcm.services import Services
from tests.conftest import new_tenant, settings_for
from tests.integration.retrieval_data import ingest


def test_a_postgres_read_session_refuses_to_write(pg_db: Database) -> None:
    with pg_db.read_session() as session:
        session.add(Tenant(id="t_x", name="x", settings_overrides={}))
        with pytest.raises(DBAPIError, match="read-only transaction"):
            session.flush()
    with pg_db.read_session() as session:
        assert session.get(Tenant, "t_x") is None


def test_hot_queries_stay_prepared_across_read_sessions(pg_db: Database) -> None:
    """psycopg prepares a query run five times on a connection, and forgets
    every prepared query at a ROLLBACK: a read session must end with COMMIT."""
    one_connection = Database(
        settings_for(
            pg_db.settings.database_url,
            db_pool_size=1,
            db_max_overflow=0,
            db_prepared_statements=True,  # what this test is about, whatever the environment
        )
    )
    tenant_id = new_tenant(one_connection, "prepared").tenant_id
    query = select(Tenant.name).where(Tenant.id == tenant_id)
    backends = set()
    for _ in range(8):
        with one_connection.read_session() as session:
            assert session.scalar(query) == "prepared"
            backends.add(session.scalar(text("SELECT pg_backend_pid()")))
    with one_connection.read_session() as session:
        prepared = session.scalars(
            text("SELECT statement FROM pg_prepared_statements WHERE statement LIKE :p"),
            {"p": "SELECT tenants.name%"},
        ).all()
        backends.add(session.scalar(text("SELECT pg_backend_pid()")))
    one_connection.dispose()
    assert len(backends) == 1, "the pool handed out more than one connection"
    assert prepared, "the tenant query was not prepared: something rolled the sessions back"


def test_a_read_session_whose_statement_failed_rolls_back(pg_db: Database) -> None:
    with pg_db.read_session() as session, pytest.raises(DBAPIError):
        session.execute(text("SELECT 1 / 0"))
    # The block ended cleanly after the failure: no COMMIT was attempted on
    # the failed transaction, and the connection is usable again.
    with pg_db.read_session() as session:
        assert session.scalar(text("SELECT 1")) == 1


def test_a_key_lookup_session_runs_in_autocommit(pg_db: Database) -> None:
    with pg_db.lookup_session() as session:
        # No transaction block: each statement is a transaction of its own.
        session.execute(text("SELECT pg_sleep(0.01)"))
        assert session.scalar(text("SELECT now() = statement_timestamp()")) is True
    with pg_db.read_session() as session:
        session.execute(text("SELECT pg_sleep(0.01)"))
        assert session.scalar(text("SELECT now() = statement_timestamp()")) is False


def test_a_serving_process_reads_a_pass_s_context_outside_a_transaction(pg_db: Database) -> None:
    """The worker's context reads stand alone: no BEGIN and COMMIT round trips around them."""
    tenant = new_tenant(pg_db)
    cid = ingest(pg_db, tenant.tenant_id, "agent", [f"message {i}" for i in range(6)])
    engine = Services.build(pg_db.settings, database=pg_db).compaction_jobs().engine
    inside: list[bool] = []

    def record(conn: Any, cursor: Any, statement: str, *args: object) -> None:
        if statement.lstrip().startswith("SELECT") and "FROM context_items" in statement:
            status = conn.connection.dbapi_connection.info.transaction_status
            inside.append(status != TransactionStatus.IDLE)

    event.listen(pg_db.engine, "after_cursor_execute", record)
    try:
        entries = engine.load(cid)
        with pg_db.transaction() as session:  # the recorder tells a transaction's read apart
            CompactionRepository(session).load_entries(cid)
    finally:
        event.remove(pg_db.engine, "after_cursor_execute", record)
    assert len(entries) == 6
    assert inside == [False, True]

"""Migrations run forward and back on both databases and match the models."""

from __future__ import annotations

from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect

from lcm.db.engine import normalize_url
from lcm.db.migrate import current_revision, downgrade, upgrade
from lcm.db.models import Base
from lcm.db.search_objects import include_name
from tests import servers


def _roundtrip(url: str) -> None:
    upgrade(url)
    head = current_revision(url)
    assert head is not None
    engine = create_engine(normalize_url(url))
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"include_name": include_name})
        diff = compare_metadata(context, Base.metadata)
        tables = set(inspect(conn).get_table_names())
    engine.dispose()
    assert diff == [], f"models and migrations disagree: {diff}"
    assert {t.name for t in Base.metadata.sorted_tables} <= tables
    downgrade(url, "base")
    assert current_revision(url) is None
    upgrade(url)
    assert current_revision(url) == head


def test_sqlite(tmp_path: Path) -> None:
    _roundtrip(f"sqlite:///{tmp_path / 'm.db'}")


def test_postgres(pg_server: servers.PostgresHandle) -> None:
    import psycopg

    with psycopg.connect(pg_server.admin_url, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS lcm_migrations WITH (FORCE)")
        conn.execute("CREATE DATABASE lcm_migrations")
    url = servers.with_database(pg_server.admin_url, "lcm_migrations")
    try:
        _roundtrip(url)
    finally:
        with psycopg.connect(pg_server.admin_url, autocommit=True) as conn:
            conn.execute("DROP DATABASE IF EXISTS lcm_migrations WITH (FORCE)")


def _search_indexes(url: str) -> set[str]:
    engine = create_engine(normalize_url(url))
    with engine.connect() as conn:
        names = {
            str(index["name"])
            for table in ("messages", "summaries")
            for index in inspect(conn).get_indexes(table)
            if "content" in (index["name"] or "")
        }
    engine.dispose()
    return names


def test_postgres_search_indexes_lead_with_the_conversation_and_come_back(
    pg_server: servers.PostgresHandle,
) -> None:
    """0032 swaps 0002's text GIN indexes for (conversation_id, text) ones (the
    embedded server has btree_gin); its downgrade puts 0002's back."""
    import psycopg

    with psycopg.connect(pg_server.admin_url, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS lcm_migrations_gin WITH (FORCE)")
        conn.execute("CREATE DATABASE lcm_migrations_gin")
    url = servers.with_database(pg_server.admin_url, "lcm_migrations_gin")
    led = {
        f"ix_{t}_conversation_content_{k}"
        for t in ("messages", "summaries")
        for k in ("tsv", "trgm")
    }
    plain = {f"ix_{t}_content_{k}" for t in ("messages", "summaries") for k in ("tsv", "trgm")}
    try:
        upgrade(url)
        assert _search_indexes(url) == led
        downgrade(url, "0031_summary_search_keys")
        assert _search_indexes(url) == plain
        upgrade(url)
        assert _search_indexes(url) == led
    finally:
        with psycopg.connect(pg_server.admin_url, autocommit=True) as conn:
            conn.execute("DROP DATABASE IF EXISTS lcm_migrations_gin WITH (FORCE)")

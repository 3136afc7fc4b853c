"""Migration 0032 on Postgres: its GIN indexes are built CONCURRENTLY, so writes to
messages go on during the build, and an invalid leftover of a failed build is
rebuilt rather than taken for done."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import psycopg
import pytest

from bench.growth_seed import Seeder
from lcm.db.engine import Database
from lcm.db.migrate import downgrade, upgrade
from tests import servers
from tests.conftest import new_tenant, settings_for

pytestmark = pytest.mark.postgres
BEFORE = "0031_summary_search_keys"
TSV = "ix_messages_conversation_content_tsv"


@pytest.fixture
def url(pg_server: servers.PostgresHandle) -> Iterator[str]:
    """A database of its own at revision 0031, holding 40,000 messages."""
    with psycopg.connect(pg_server.admin_url, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS lcm_migration_0032 WITH (FORCE)")
        conn.execute("CREATE DATABASE lcm_migration_0032")
    url = servers.with_database(pg_server.admin_url, "lcm_migration_0032")
    upgrade(url)
    database = Database(settings_for(url))
    tenant = new_tenant(database).tenant_id
    with database.engine.connect() as conn:
        Seeder(conn, tenant).raw(["a", "b"], 20_000)
        conn.commit()
    database.dispose()
    downgrade(url, BEFORE)
    try:
        yield url
    finally:
        with psycopg.connect(pg_server.admin_url, autocommit=True) as conn:
            conn.execute("DROP DATABASE IF EXISTS lcm_migration_0032 WITH (FORCE)")


def _conninfo(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


def test_writes_to_messages_go_on_while_the_indexes_are_built(url: str) -> None:
    """A plain CREATE INDEX holds a SHARE lock, which every INSERT/UPDATE waits for."""
    failures: list[BaseException] = []

    def migrate() -> None:
        try:
            upgrade(url)
        except BaseException as exc:  # pragma: no cover - reported below
            failures.append(exc)

    thread = threading.Thread(target=migrate)
    with psycopg.connect(_conninfo(url), autocommit=True) as conn:
        thread.start()
        deadline = time.monotonic() + 60
        building = None
        while building is None and time.monotonic() < deadline and thread.is_alive():
            building = conn.execute(
                "SELECT 1 FROM pg_stat_progress_create_index p "
                "JOIN pg_class c ON c.oid = p.relid WHERE c.relname = 'messages'"
            ).fetchone()
            time.sleep(0.005)
        assert building is not None, "never saw the messages index being built"
        conn.execute("SET lock_timeout = '2s'")
        # A write's ROW EXCLUSIVE lock on messages, taken while the build runs.
        conn.execute("UPDATE messages SET seq = seq WHERE id = (SELECT min(id) FROM messages)")
        # The write did not wait for the build to end.
        after = conn.execute("SELECT count(*) FROM pg_stat_progress_create_index").fetchone()
    thread.join(120)
    assert not failures, failures
    assert after == (1,)


def test_an_invalid_leftover_of_a_failed_build_is_rebuilt(url: str) -> None:
    with psycopg.connect(_conninfo(url), autocommit=True) as conn:
        # What a cancelled CREATE INDEX CONCURRENTLY leaves: the name, marked invalid.
        conn.execute(f"CREATE INDEX {TSV} ON messages USING gin (content_tsv)")
        conn.execute(f"UPDATE pg_index SET indisvalid = false WHERE indexrelid = '{TSV}'::regclass")
    upgrade(url)
    with psycopg.connect(_conninfo(url), autocommit=True) as conn:
        row = conn.execute(
            "SELECT i.indisvalid, pg_get_indexdef(i.indexrelid) FROM pg_index i "
            f"WHERE i.indexrelid = '{TSV}'::regclass"
        ).fetchone()
    assert row is not None
    valid, definition = row
    assert valid
    assert "(conversation_id, content_tsv)" in definition, definition

"""Migrations 0030 (summaries' source ranges, backfilled) and 0031 (SQLite: summaries'
search rows keyed by an indexed key) on a DAG written before them."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import pytest
from sqlalchemy import Connection, create_engine, select, text
from sqlalchemy.orm import Session

from lcm.db.engine import Database, normalize_url
from lcm.db.migrate import upgrade
from lcm.db.models import Summary
from lcm.retrieval.describe import SourceRange, source_range
from lcm.retrieval.repository import HistoryRepository
from tests import servers
from tests.conftest import new_tenant
from tests.integration.retrieval_data import compact, ingest

VERSIONS = Path(__file__).parents[2] / "lcm" / "db" / "migrations" / "versions"
BEFORE = "0029_context_appends"
AT = ":at"  # bound: a literal's ":00" would read as a parameter
START = datetime(2026, 1, 1, tzinfo=UTC)

# conversation 1: leaves L1 (seqs 1-3), L2 (4-6), L3 (7-8); C1 = L1 + L2; C2 = C1 + L3.
# conversation 2: M1 (seqs 1-2, and a link to a message that no longer exists),
# M2 (no messages), D1 = M1 + M2, and X1 = C2: a summary of conversation 2 condensed
# from one of conversation 1 (a retained one).
LEAVES = {"L1": (1, [1, 2, 3]), "L2": (1, [4, 5, 6]), "L3": (1, [7, 8]), "M1": (2, [1, 2])}
LEAVES["M2"] = (2, [])
CONDENSED = {
    "C1": (1, 1, ["L1", "L2"]),
    "C2": (1, 2, ["C1", "L3"]),
    "D1": (2, 1, ["M1", "M2"]),
    "X1": (2, 3, ["C2"]),
}
EXPECTED = {
    "L1": (3, 1, 3),
    "L2": (3, 4, 6),
    "L3": (2, 7, 8),
    "C1": (6, 1, 6),
    "C2": (8, 1, 8),
    "M1": (2, 1, 2),
    "M2": (0, None, None),
    "D1": (2, 1, 2),
    "X1": (8, 1, 8),
}


def sid(name: str) -> str:
    return f"sum_{name.lower():0>16}"


def _seed(conn: Connection) -> None:
    """The DAG above, in plain SQL against the schema of ``BEFORE``."""
    at = {"at": START}
    conn.execute(
        text(
            "INSERT INTO tenants (id, name, settings_overrides, created_at) "
            f"VALUES ('t', 't', '{{}}', {AT})"
        ),
        at,
    )
    for cid in (1, 2):
        conn.execute(
            text(
                "INSERT INTO conversations (id, tenant_id, session_key, created_at, "
                "context_version, last_seq, last_ordinal) "
                f"VALUES ({cid}, 't', 'k{cid}', {AT}, 0, 8, 0)"
            ),
            at,
        )
    message_ids: dict[tuple[int, int], int] = {}
    for cid, last in ((1, 8), (2, 2)):
        for seq in range(1, last + 1):
            message_ids[cid, seq] = mid = cid * 100 + seq
            conn.execute(
                text(
                    "INSERT INTO messages (id, tenant_id, conversation_id, seq, role, content, "
                    f"content_shape, token_count, created_at) VALUES ({mid}, 't', {cid}, {seq}, "
                    f"'user', 'message {seq}', 'text', 3, {AT})"
                ),
                at,
            )
    rows = [(n, cid, "leaf", 0) for n, (cid, _) in LEAVES.items()]
    rows += [(n, cid, "condensed", depth) for n, (cid, depth, _) in CONDENSED.items()]
    for name, cid, kind, depth in rows:
        conn.execute(
            text(
                "INSERT INTO summaries (id, tenant_id, conversation_id, kind, depth, content, "
                "token_count, source_token_count, earliest_at, latest_at, descendant_count, "
                f"file_ids, created_at, escalation, model) VALUES ('{sid(name)}', 't', {cid}, "
                f"'{kind}', {depth}, 'summary {name} of the quokka', 5, 5, {AT}, {AT}, 0, '[]', "
                f"{AT}, 'normal', 'm')"
            ),
            at,
        )
    links = [
        (n, message_ids[cid, seq], i)
        for n, (cid, seqs) in LEAVES.items()
        for i, seq in enumerate(seqs)
    ]
    links.append(("M1", 999_999, 2))  # its message is gone (links have no foreign key)
    for name, mid, ordinal in links:
        conn.execute(
            text(
                "INSERT INTO summary_messages (summary_id, message_id, tenant_id, ordinal) "
                f"VALUES ('{sid(name)}', {mid}, 't', {ordinal})"
            )
        )
    for name, (_cid, _depth, parents) in CONDENSED.items():
        for i, parent in enumerate(parents):
            conn.execute(
                text(
                    "INSERT INTO summary_parents (summary_id, parent_id, tenant_id, ordinal) "
                    f"VALUES ('{sid(name)}', '{sid(parent)}', 't', {i})"
                )
            )


def _ranges(url: str) -> dict[str, tuple[int | None, int | None, int | None]]:
    engine = create_engine(normalize_url(url))
    try:
        with Session(engine) as s:
            repo = HistoryRepository(s)
            found = {}
            for summary in s.scalars(select(Summary)):
                name = next(n for n in EXPECTED if sid(n) == summary.id)
                stored = (
                    summary.source_message_count,
                    summary.source_first_seq,
                    summary.source_last_seq,
                )
                # What describe's walk finds is what the migration stored.
                walked = source_range(repo, [summary.id])
                assert SourceRange(*stored) == walked, name  # type: ignore[arg-type]
                found[name] = stored
            return found
    finally:
        engine.dispose()


def _migration(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, VERSIONS / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _backfill_again_in_batches_of_one(url: str) -> None:
    """0030's backfill again, one conversation per batch, over ranges reset to NULL."""
    module = _migration("0030_summary_source_ranges")
    module.BATCH_CONVERSATIONS = 1  # type: ignore[attr-defined]
    engine = create_engine(normalize_url(url))
    try:
        with engine.begin() as conn:
            conn.execute(
                text(
                    "UPDATE summaries SET source_message_count = NULL, "
                    "source_first_seq = NULL, source_last_seq = NULL"
                )
            )
            module.backfill(conn)
    finally:
        engine.dispose()


def _check_backfill(url: str) -> None:
    upgrade(url, BEFORE)
    engine = create_engine(normalize_url(url))
    with engine.begin() as conn:
        _seed(conn)
    engine.dispose()
    upgrade(url)
    assert _ranges(url) == EXPECTED
    _backfill_again_in_batches_of_one(url)
    assert _ranges(url) == EXPECTED


def test_sqlite_backfill_and_search_keys(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    _check_backfill(url)
    engine = create_engine(normalize_url(url))
    try:
        with engine.connect() as conn:
            keys: dict[str, int] = dict(
                conn.execute(text("SELECT summary_id, search_key FROM summary_search_keys")).all()
            )
            assert set(keys) == {sid(n) for n in EXPECTED}
            for table in ("summaries_fts", "summaries_trigram"):
                # Each summary's row, once, under its key; and still found by its words.
                rows = conn.execute(text(f"SELECT summary_id, rowid FROM {table}")).all()
                assert sorted(rows) == sorted(keys.items())
                hits = conn.execute(
                    text(f"SELECT summary_id FROM {table} WHERE {table} MATCH :q"),
                    {"q": '"summary C2 of"'},
                ).scalars()
                assert list(hits) == [sid("C2")]
    finally:
        engine.dispose()


@pytest.fixture
def pg_url(pg_server: servers.PostgresHandle) -> Iterator[str]:
    import psycopg

    with psycopg.connect(pg_server.admin_url, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS lcm_ranges WITH (FORCE)")
        conn.execute("CREATE DATABASE lcm_ranges")
    yield servers.with_database(pg_server.admin_url, "lcm_ranges")
    with psycopg.connect(pg_server.admin_url, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS lcm_ranges WITH (FORCE)")


def test_postgres_backfill(pg_url: str) -> None:
    _check_backfill(pg_url)


def _trigger_statements(conn: Connection, name: str) -> list[str]:
    """The statements of trigger ``name``, its row's columns made parameters."""
    sql = conn.execute(
        text("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = :n"), {"n": name}
    ).scalar_one()
    body = sql[sql.index("BEGIN") + len("BEGIN") : sql.rindex("END")]
    for column, param in (("old.id", ":id"), ("new.id", ":id"), ("new.content", ":c")):
        body = body.replace(column, param)
    return [s.strip() for s in body.split(";") if s.strip()]


def test_sqlite_summary_search_triggers_find_rows_through_indexes(
    sqlite_db: Database,
) -> None:
    """Each statement of the delete and update triggers is an indexed lookup, no scan:
    an erase's cost no longer grows with every summary stored."""
    with sqlite_db.engine.connect() as conn:
        for trigger in ("summaries_search_delete", "summaries_search_update"):
            for statement in _trigger_statements(conn, trigger):
                plan = [
                    row[3]
                    for row in conn.execute(
                        text(f"EXPLAIN QUERY PLAN {statement}"), {"id": "sum_x", "c": "x"}
                    )
                ]
                for step in plan:
                    if "VIRTUAL TABLE INDEX" in step:
                        # FTS5's plan names its constraint after the colon: "=" for the rowid.
                        assert not step.endswith(":"), (trigger, statement, plan)
                    else:
                        assert not step.startswith("SCAN"), (trigger, statement, plan)


def test_sqlite_summary_search_rows_follow_writes(sqlite_db: Database) -> None:
    tenant = new_tenant(sqlite_db)
    sent = [f"message {i} about the deploy pipeline " + "and its stages " * 8 for i in range(40)]
    cid = ingest(sqlite_db, tenant.tenant_id, "agent:main", sent)
    compact(sqlite_db, tenant.tenant_id, cid)
    with sqlite_db.transaction() as s:
        ids = list(s.scalars(select(Summary.id).where(Summary.conversation_id == cid)))
        s.execute(
            text("UPDATE summaries SET content = 'the wombat rewrite' WHERE id = :id"),
            {"id": ids[0]},
        )
    with sqlite_db.engine.connect() as conn:
        keys: dict[str, int] = dict(
            conn.execute(text("SELECT summary_id, search_key FROM summary_search_keys")).all()
        )
        assert set(keys) == set(ids)
        for table in ("summaries_fts", "summaries_trigram"):
            rows = conn.execute(text(f"SELECT summary_id, rowid FROM {table}")).all()
            assert sorted(rows) == sorted(keys.items())  # one row each, under its key
            hits = conn.execute(
                text(f"SELECT summary_id FROM {table} WHERE {table} MATCH 'wombat'")
            ).scalars()
            assert list(hits) == [ids[0]]
    with sqlite_db.transaction() as s:
        s.execute(text("DELETE FROM summary_parents"))
        s.execute(text("DELETE FROM context_items WHERE summary_id IS NOT NULL"))
        s.execute(text("DELETE FROM summaries WHERE id = :id"), {"id": ids[0]})
    with sqlite_db.engine.connect() as conn:
        left = set(conn.execute(text("SELECT summary_id FROM summary_search_keys")).scalars())
        assert left == set(ids[1:])
        for table in ("summaries_fts", "summaries_trigram"):
            indexed = set(conn.execute(text(f"SELECT summary_id FROM {table}")).scalars())
            assert indexed == set(ids[1:])

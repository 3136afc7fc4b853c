"""Each summary's stored source range (migration 0030) is the one the describe walk finds.

Written by leaf and condensed passes, by import, by the bulk seeder, and
by migration 0030's backfill; describe reads it in a fixed number of
statements whatever the summary's subtree. On SQLite and on Postgres.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import event, select

from bench.growth_seed import Seeder
from lcm.db.engine import Database
from lcm.db.models import Summary
from lcm.retrieval.describe import SourceRange, describe_summary, source_range
from lcm.retrieval.repository import HistoryRepository
from lcm.settings import Settings
from lcm.tenants.service import IssuedKey
from tests.conftest import auth
from tests.integration.erasure_world import (
    api,  # noqa: F401  (fixture)
    build_conversation,
    files_dir,  # noqa: F401  (fixture)
    world_settings,  # noqa: F401  (fixture)
)
from tests.integration.retrieval_data import compact, ingest


def stored(summary: Summary) -> tuple[int | None, int | None, int | None]:
    return summary.source_message_count, summary.source_first_seq, summary.source_last_seq


def as_tuple(found: SourceRange) -> tuple[int | None, int | None, int | None]:
    return found.message_count, found.first_seq, found.last_seq


def stored_and_walked(db: Database, conversation_id: int) -> list[tuple[Summary, SourceRange]]:
    """Every summary of the conversation with the range the walk finds for it."""
    with db.read_session() as s:
        repo = HistoryRepository(s)
        rows = list(s.scalars(select(Summary).where(Summary.conversation_id == conversation_id)))
        return [(row, source_range(repo, [row.id])) for row in rows]


def test_leaf_and_condensed_passes_store_the_walked_range(db: Database, tenant: IssuedKey) -> None:
    sent = [f"message {i} about the deploy pipeline " + "and its stages " * 8 for i in range(40)]
    cid = ingest(db, tenant.tenant_id, "agent:main", sent)
    compact(db, tenant.tenant_id, cid)
    found = stored_and_walked(db, cid)
    assert {s.kind for s, _ in found} == {"leaf", "condensed"}
    for summary, walked in found:
        assert summary.source_message_count is not None, summary.id
        assert stored(summary) == as_tuple(walked), summary.id
        assert walked.message_count == summary.descendant_count
    condensed = next(s for s, _ in found if s.kind == "condensed")
    assert condensed.source_message_count is not None
    assert condensed.source_message_count > 1


def test_import_stores_the_walked_range(
    db: Database,
    tenant: IssuedKey,
    api: TestClient,  # noqa: F811
    world_settings: Settings,  # noqa: F811
    files_dir: Path,  # noqa: F811
) -> None:
    build_conversation(
        db, api, world_settings, tenant.tenant_id, tenant.api_key, "orig", "orig", unique_file=False
    )
    exported = api.get("/v1/conversations/orig/export", headers=auth(tenant)).content
    assert b"source_message_count" not in exported  # derived: recomputed on import
    body = b"\n".join(line for line in exported.splitlines() if b'"type":"file"' not in line)
    r = api.post("/v1/conversations/copy/import", headers=auth(tenant), content=body)
    assert r.status_code == 200, r.text
    found = stored_and_walked(db, r.json()["conversation_id"])
    assert {s.kind for s, _ in found} == {"leaf", "condensed"}
    for summary, walked in found:
        assert summary.source_message_count is not None, summary.id
        assert stored(summary) == as_tuple(walked), summary.id


class StatementLog:
    """The SQL statements run on an engine while it is active."""

    def __init__(self) -> None:
        self.statements: list[str] = []

    def __call__(self, _conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        self.statements.append(statement)


def _describe_statements(db: Database, tenant_id: str, summary_id: str) -> tuple[list[str], Any]:
    log = StatementLog()
    event.listen(db.engine, "before_cursor_execute", log)
    try:
        with db.read_session() as s:
            described = describe_summary(s, tenant_id, summary_id)
    finally:
        event.remove(db.engine, "before_cursor_execute", log)
    return log.statements, described


def _seeded(db: Database, tenant_id: str, messages: int) -> Iterator[Summary]:
    with db.engine.connect() as conn:
        cid = Seeder(conn, tenant_id).compacted("seeded", messages)
        conn.commit()
    with db.read_session() as s:
        yield from s.scalars(select(Summary).where(Summary.conversation_id == cid))


def test_describe_reads_the_stored_range_in_statements_that_do_not_grow_with_the_subtree(
    db: Database, tenant: IssuedKey
) -> None:
    summaries = list(_seeded(db, tenant.tenant_id, 2_000))
    top = max(summaries, key=lambda s: s.depth)
    depth1 = next(s for s in summaries if s.depth == 1)
    assert top.depth >= 2
    small, small_described = _describe_statements(db, tenant.tenant_id, depth1.id)
    large, large_described = _describe_statements(db, tenant.tenant_id, top.id)
    # The same statements, one for one: none of them walks the subtree.
    assert large == small
    assert large_described.source_messages.message_count >= (
        4 * small_described.source_messages.message_count
    )
    assert large_described.source_messages == source_range_of(db, top.id)
    assert small_described.source_messages == source_range_of(db, depth1.id)
    # The bulk seeder stores what a pass would have stored.
    for summary in summaries:
        assert stored(summary) == as_tuple(source_range_of(db, summary.id)), summary.id


def source_range_of(db: Database, summary_id: str) -> SourceRange:
    with db.read_session() as s:
        return source_range(HistoryRepository(s), [summary_id])


def test_a_summary_without_a_stored_range_is_described_by_walking(
    db: Database, tenant: IssuedKey
) -> None:
    """A server older than migration 0030 writes no range: describe still answers right."""
    sent = [f"message {i} about the deploy pipeline " + "and its stages " * 8 for i in range(40)]
    cid = ingest(db, tenant.tenant_id, "agent:main", sent)
    compact(db, tenant.tenant_id, cid)
    (summary, walked) = next((s, w) for s, w in stored_and_walked(db, cid) if s.kind == "condensed")
    with db.transaction() as s:
        row = s.get(Summary, summary.id)
        assert row is not None
        row.source_message_count = row.source_first_seq = row.source_last_seq = None
    statements, described = _describe_statements(db, tenant.tenant_id, summary.id)
    assert described.source_messages == walked
    assert any("summary_messages" in sql for sql in statements)  # it walked

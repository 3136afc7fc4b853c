"""grep's text indexes on Postgres are led by conversation_id (migration 0032):
grep in one conversation asks the index for that conversation's matches only,
and grep across a tenant still finds its rows through the same indexes."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sqlalchemy import text

from bench.growth import LIMITS, QUERIES
from bench.growth_plans import grep_plans
from bench.growth_seed import Seeder
from lcm.db.engine import Database
from lcm.retrieval.grep import grep
from lcm.retrieval.search_rows import Bounds
from tests.conftest import new_tenant

pytestmark = pytest.mark.postgres
TSV = "ix_messages_conversation_content_tsv"
TRGM = "ix_messages_conversation_content_trgm"


@pytest.fixture
def seeded(pg_db: Database) -> tuple[Database, str, list[int]]:
    """4 conversations of 5,000 messages (the bench's text), ANALYZEd."""
    tenant = new_tenant(pg_db).tenant_id
    with pg_db.engine.connect() as conn:
        cids = Seeder(conn, tenant).raw([f"c{n}" for n in range(4)], 5_000)
        conn.commit()
    with pg_db.engine.begin() as conn:
        conn.execute(text("ANALYZE messages"))
    return pg_db, tenant, cids


def _index_lines(plan: str) -> list[str]:
    return [line for line in plan.splitlines() if "Index Cond" in line or "Index Scan" in line]


def test_grep_in_one_conversation_asks_the_index_for_that_conversation(
    seeded: tuple[Database, str, list[int]],
) -> None:
    db, tenant, cids = seeded
    bounds = Bounds(tenant, (cids[2],))
    (full_text,) = grep_plans(db, bounds, QUERIES["grep full_text"], LIMITS)
    (regex,) = grep_plans(db, bounds, QUERIES["grep regex"], LIMITS)
    assert TSV in full_text, full_text
    assert TRGM in regex, regex
    for plan in (full_text, regex):
        # The conversation is a condition of the index scan, not a heap filter.
        conditions = " ".join(line for line in _index_lines(plan) if "Index Cond" in line)
        assert "conversation_id" in conditions, plan


def test_grep_across_a_tenant_still_reads_the_text_indexes(
    seeded: tuple[Database, str, list[int]],
) -> None:
    db, tenant, _cids = seeded
    bounds = Bounds(tenant, None)
    (full_text,) = grep_plans(db, bounds, QUERIES["grep full_text"], LIMITS)
    (regex,) = grep_plans(db, bounds, QUERIES["grep regex"], LIMITS)
    assert TSV in full_text, full_text
    assert TRGM in regex, regex
    assert "Seq Scan" not in full_text + regex


def test_grep_finds_the_same_messages_in_a_conversation_as_across_the_tenant(
    seeded: tuple[Database, str, list[int]],
) -> None:
    """The conversation's matches through the conversation-led index are exactly
    the tenant-wide matches that belong to that conversation."""
    db, tenant, cids = seeded
    for name in ("grep full_text", "grep regex"):
        query = replace(QUERIES[name], limit=200)
        with db.session() as s:
            wide = grep(s, Bounds(tenant, None), query, LIMITS).matches
            one = grep(s, Bounds(tenant, (cids[2],)), query, LIMITS).matches
        assert one, name
        expected = {m.id for m in wide if m.conversation_id == cids[2]}
        assert {m.id for m in one} == expected, name

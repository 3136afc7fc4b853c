"""The compaction engine summarizing through the real Anthropic SDK and the fake server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import select

from lcm.compaction.engine import CompactionEngine
from lcm.db.engine import Database
from lcm.db.models import LlmUsage, Summary
from lcm.settings import CompactionSettings
from lcm.summarize.llm import Breakers
from lcm.summarize.summarizer import Summarizer
from lcm.tenants.service import IssuedKey
from tests.fakes import FakeAnthropicServer
from tests.fakes.providers import anthropic_provider
from tests.helpers import compact, next_plan
from tests.integration.test_compaction_engine import assert_lossless, fill

MODEL = "claude-test"
SETTINGS = CompactionSettings(fresh_tail_count=8, leaf_chunk_tokens=1_000, summary_model=MODEL)


@pytest.fixture
def llm() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as server:
        yield server


def engine_on(db: Database, llm: FakeAnthropicServer, breakers: Breakers) -> CompactionEngine:
    provider = anthropic_provider(llm.base_url, MODEL, breakers=breakers)
    return CompactionEngine(db.transaction, Summarizer(provider))


def summaries(db: Database) -> list[Summary]:
    with db.session() as s:
        return list(s.scalars(select(Summary).order_by(Summary.created_at, Summary.id)))


def test_passes_carry_the_previous_summary_and_record_usage(
    db: Database, tenant: IssuedKey, llm: FakeAnthropicServer
) -> None:
    cid = fill(db, tenant.tenant_id, 80)
    eng = engine_on(db, llm, Breakers(5, 30))
    first = next_plan(eng, cid, SETTINGS, 2_000)
    assert first is not None
    assert first.previous_summary is None
    made = eng.run_pass(tenant.tenant_id, cid, first, SETTINGS)
    second = next_plan(eng, cid, SETTINGS, 2_000)
    assert second is not None
    assert second.kind == "leaf"
    assert second.previous_summary is not None
    assert second.previous_summary.id == made.summary_id
    eng.run_pass(tenant.tenant_id, cid, second, SETTINGS)
    stored = summaries(db)
    assert [s.model for s in stored] == [MODEL, MODEL]
    assert all(s.escalation == "normal" for s in stored)
    # Continuity: the second request shows the model the first summary.
    assert stored[0].content.splitlines()[0] in llm.requests[-1].user_text
    with db.session() as s:
        usage = s.scalars(select(LlmUsage)).all()
    assert len(usage) == 2
    assert all(u.input_tokens > 0 and u.model == MODEL for u in usage)
    assert_lossless(db, cid)


def test_oversized_output_escalates_to_aggressive_then_truncation(
    db: Database, tenant: IssuedKey, llm: FakeAnthropicServer
) -> None:
    cid = fill(db, tenant.tenant_id, 60)
    eng = engine_on(db, llm, Breakers(5, 30))
    llm.script(["oversized", "oversized"])
    plan = next_plan(eng, cid, SETTINGS, 2_000)
    assert plan is not None
    outcome = eng.run_pass(tenant.tenant_id, cid, plan, SETTINGS)
    assert outcome.escalation == "fallback"
    (summary,) = summaries(db)
    assert "[Truncated for context management]" in summary.content
    assert summary.token_count < plan.source_tokens
    assert len(llm.requests) == 2  # normal, then aggressive, then no more calls
    assert_lossless(db, cid)


def test_a_failing_provider_opens_the_breaker_and_compaction_still_progresses(
    db: Database, tenant: IssuedKey, llm: FakeAnthropicServer
) -> None:
    cid = fill(db, tenant.tenant_id, 200)
    llm.set_default("500")
    eng = engine_on(db, llm, Breakers(2, 3_600))
    result = compact(db, tenant.tenant_id, cid, SETTINGS, 2_000, summarizer=eng.summarizer)
    assert len(result.passes) >= 4
    stored = summaries(db)
    assert all(s.escalation == "fallback" and s.model == "truncation" for s in stored)
    # Two failed calls open the breaker; every later pass falls back without a request.
    assert len(llm.requests) == 2
    assert result.tokens_after < result.tokens_before
    assert_lossless(db, cid)

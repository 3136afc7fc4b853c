"""The compaction engine on real databases: lossless, fenced, range-checked."""

from __future__ import annotations

import random
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from lcm.assembly.service import assemble
from lcm.compaction.engine import CompactionEngine
from lcm.compaction.repository import CompactionRepository
from lcm.content import IncomingMessage
from lcm.context import context_tokens
from lcm.db.engine import Database
from lcm.db.models import (
    CompactionRun,
    ContextItem,
    LlmUsage,
    Message,
    Summary,
    SummaryMessage,
)
from lcm.errors import ContextChanged, StaleLease
from lcm.ingest.service import ingest_messages, prepare_batch
from lcm.policy.threshold import evaluate_threshold
from lcm.settings import CompactionSettings
from lcm.summarize.extractive import ExtractiveProvider
from lcm.summarize.provider import Completion, SummaryRequest
from lcm.summarize.summarizer import Summarizer
from lcm.tenants.service import IssuedKey
from tests.helpers import compact, next_plan

WORDS = [
    "deploy",
    "build",
    "test",
    "config",
    "server",
    "client",
    "database",
    "migration",
    "error",
    "fix",
    "/src/app.py",
    "version",
    "1.2.3",
    "decided",
    "will",
    "must",
    "Alice",
    "Bob",
    "2026-11-22",
]


def fill(db: Database, tenant_id: str, n: int, *, seed: int = 1, key: str = "k") -> int:
    rng = random.Random(seed)
    conversation_id = 0
    for start in range(0, n, 500):
        msgs = []
        for i in range(start, min(n, start + 500)):
            words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(10, 120)))
            msgs.append(IncomingMessage("user" if i % 2 == 0 else "assistant", f"{i}: {words}"))
        with db.transaction() as session:
            batch = prepare_batch(msgs, max_batch=1000, max_chars=10**6)
            conversation_id = ingest_messages(session, tenant_id, key, None, batch).conversation_id
    return conversation_id


def engine(db: Database) -> CompactionEngine:
    return CompactionEngine(db.transaction, Summarizer(ExtractiveProvider()))


def assert_lossless(db: Database, conversation_id: int) -> None:
    with db.session() as s:
        reachable = Counter(CompactionRepository(s).reachable_message_ids(conversation_id))
        all_ids = set(
            s.scalars(select(Message.id).where(Message.conversation_id == conversation_id))
        )
    assert set(reachable) == all_ids, "a message is unreachable from the context"
    assert max(reachable.values()) == 1, "a message is reachable twice"


def test_leaf_pass_writes_a_linked_summary(db: Database, tenant: IssuedKey) -> None:
    cid = fill(db, tenant.tenant_id, 120)
    settings = CompactionSettings(fresh_tail_count=16, leaf_chunk_tokens=2_000)
    eng = engine(db)
    plan = next_plan(eng, cid, settings, token_budget=4_000)
    assert plan is not None
    assert plan.kind == "leaf"
    outcome = eng.run_pass(tenant.tenant_id, cid, plan, settings)
    with db.session() as s:
        summary = s.get(Summary, outcome.summary_id)
        assert summary is not None
        items = s.scalars(
            select(ContextItem)
            .where(ContextItem.conversation_id == cid)
            .order_by(ContextItem.ordinal)
        ).all()
        runs = s.scalars(select(CompactionRun)).all()
        usage = s.scalar(select(func.count()).select_from(LlmUsage))
    assert summary.id.startswith("sum_")
    assert len(summary.id) == 20
    assert summary.depth == 0
    assert summary.kind == "leaf"
    assert summary.descendant_count == len(plan.message_ids)
    assert summary.model == "extractive"
    assert summary.earliest_at <= summary.latest_at
    assert "Expand for details about:" in summary.content
    assert items[0].summary_id == summary.id
    assert items[0].ordinal == plan.first_ordinal
    assert len(items) == 120 - len(plan.message_ids) + 1
    assert [r.kind for r in runs] == ["leaf"]
    assert runs[0].tokens_in == plan.source_tokens
    assert usage == 1
    assert_lossless(db, cid)


def test_replaying_a_committed_pass_is_rejected(db: Database, tenant: IssuedKey) -> None:
    cid = fill(db, tenant.tenant_id, 60)
    settings = CompactionSettings(fresh_tail_count=8, leaf_chunk_tokens=1_000)
    eng = engine(db)
    plan = next_plan(eng, cid, settings, 2_000)
    assert plan is not None
    eng.run_pass(tenant.tenant_id, cid, plan, settings)
    after_first = eng.load(cid)
    with pytest.raises(ContextChanged):
        eng.run_pass(tenant.tenant_id, cid, plan, settings)
    # The replay's rows went in with the range's removal (one statement on
    # Postgres) and all went out with the rollback.
    assert_one_pass_kept(db, cid, len(plan.message_ids))
    assert eng.load(cid) == after_first
    assert_lossless(db, cid)


def assert_one_pass_kept(db: Database, conversation_id: int, links: int) -> None:
    """Exactly one pass's rows: a summary, its links, its item, a run and its usage."""
    with db.session() as s:
        assert s.scalar(select(func.count()).select_from(Summary)) == 1
        assert s.scalar(select(func.count()).select_from(SummaryMessage)) == links
        assert s.scalar(select(func.count()).select_from(CompactionRun)) == 1
        assert s.scalar(select(func.count()).select_from(LlmUsage)) == 1
        summary_items = select(func.count()).where(
            ContextItem.conversation_id == conversation_id, ContextItem.summary_id.is_not(None)
        )
        assert s.scalar(summary_items) == 1


class MeetingProvider:
    """Summarizes only once every pass of a race is summarizing: their commits then race."""

    def __init__(self, barrier: threading.Barrier) -> None:
        self.barrier = barrier
        self.inner = ExtractiveProvider()

    def complete(self, request: SummaryRequest) -> Completion:
        self.barrier.wait(timeout=30)
        return self.inner.complete(request)


def test_two_passes_racing_over_one_range_commit_once(db: Database, tenant: IssuedKey) -> None:
    """Two holders of the same plan (a duplicate delivery without its fence) commit at once.

    The conversation row lock taken first in the commit serializes them;
    the second then removes the first's summary item instead of its plan's
    range, so it raises ``ContextChanged`` and keeps nothing.
    """
    cid = fill(db, tenant.tenant_id, 60)
    settings = CompactionSettings(fresh_tail_count=8, leaf_chunk_tokens=1_000)
    barrier = threading.Barrier(2)
    racer = CompactionEngine(db.transaction, Summarizer(MeetingProvider(barrier)))
    plan = next_plan(racer, cid, settings, 2_000)
    assert plan is not None

    def run() -> str:
        try:
            racer.run_pass(tenant.tenant_id, cid, plan, settings)
        except ContextChanged:
            return "changed"
        return "committed"

    with ThreadPoolExecutor(2) as pool:
        results = sorted(pool.map(lambda _: run(), range(2)))
    assert results == ["changed", "committed"]
    assert_one_pass_kept(db, cid, len(plan.message_ids))
    assert_lossless(db, cid)


def test_a_fence_that_fails_writes_nothing(db: Database, tenant: IssuedKey) -> None:
    cid = fill(db, tenant.tenant_id, 60)
    settings = CompactionSettings(fresh_tail_count=8, leaf_chunk_tokens=1_000)
    eng = engine(db)
    plan = next_plan(eng, cid, settings, 2_000)
    assert plan is not None

    def lost_lease(_session: Session) -> None:
        raise StaleLease("fencing token 3 is no longer current")

    with pytest.raises(StaleLease):
        eng.run_pass(tenant.tenant_id, cid, plan, settings, fence=lost_lease)
    with db.session() as s:
        assert s.scalar(select(func.count()).select_from(Summary)) == 0
        assert s.scalar(select(func.count()).select_from(CompactionRun)) == 0
    assert len(eng.load(cid)) == 60


def test_ingest_during_a_pass_does_not_block_its_commit(db: Database, tenant: IssuedKey) -> None:
    cid = fill(db, tenant.tenant_id, 60)
    settings = CompactionSettings(fresh_tail_count=8, leaf_chunk_tokens=1_000)
    eng = engine(db)
    plan = next_plan(eng, cid, settings, 2_000)
    assert plan is not None
    # Appends land after the planned range: the range is unchanged, the pass commits.
    fill(db, tenant.tenant_id, 5, seed=9)
    eng.run_pass(tenant.tenant_id, cid, plan, settings)
    assert_lossless(db, cid)


# -1: no limit, so condensation repeats while a depth has >= 3 summaries:
# 82 leaves -> 27 -> 9 -> 3 -> 1, i.e. depth 4.
@pytest.mark.parametrize(("max_depth", "deepest"), [(0, 0), (1, 1), (-1, 4)])
def test_sweep_max_depth(db: Database, tenant: IssuedKey, max_depth: int, deepest: int) -> None:
    cid = fill(db, tenant.tenant_id, 400)
    settings = CompactionSettings(
        fresh_tail_count=8,
        leaf_min_fanout=4,
        leaf_chunk_tokens=600,
        condensed_min_fanout=3,
        sweep_max_depth=max_depth,
        summary_prefix_target_tokens=100,
    )
    # A budget far above the context: no pressure phase, only routine work.
    compact(db, tenant.tenant_id, cid, settings, token_budget=10_000_000)
    with db.session() as s:
        depths = CompactionRepository(s).summary_counts_by_depth(cid)
    assert max(depths) == deepest
    assert_lossless(db, cid)


def test_pressure_phase_goes_deeper_with_the_hard_fanout(db: Database, tenant: IssuedKey) -> None:
    cid = fill(db, tenant.tenant_id, 300)
    settings = CompactionSettings(
        fresh_tail_count=8,
        leaf_min_fanout=4,
        leaf_chunk_tokens=600,
        condensed_min_fanout=50,
        condensed_min_fanout_hard=2,
        sweep_max_depth=0,
    )
    budget = 3_000
    compact(db, tenant.tenant_id, cid, settings, token_budget=budget)
    with db.session() as s:
        depths = CompactionRepository(s).summary_counts_by_depth(cid)
    assert max(depths) >= 1, "only the pressure phase can condense with these settings"
    assert_lossless(db, cid)


def test_large_conversation_ends_under_threshold_and_lossless(pg_db: Database) -> None:
    from tests.conftest import new_tenant

    tenant = new_tenant(pg_db)
    cid = fill(pg_db, tenant.tenant_id, 5_000)
    settings = CompactionSettings()
    budget = 100_000
    target = evaluate_threshold(0, budget, settings).threshold_tokens
    result = compact(pg_db, tenant.tenant_id, cid, settings, budget, target_tokens=target)
    after = context_tokens(engine(pg_db).load(cid))
    assert result.tokens_before > 5 * budget
    assert not evaluate_threshold(after, budget, settings).over_threshold
    assert_lossless(pg_db, cid)
    with pg_db.session() as session:
        assembled = assemble(session, cid, budget, settings)
    assert assembled.estimated_tokens <= budget
    assert assembled.fresh_tail_count == settings.fresh_tail_count
    assert result.tokens_after == after <= target


def test_assembly_reads_past_its_window_when_the_tail_does(db: Database, tenant: IssuedKey) -> None:
    # One user prompt, then a long agent loop: the latest user turn is never
    # split, so the fresh tail reaches back past what the budget window holds.
    msgs = [IncomingMessage("user", "please migrate the whole repo")]
    msgs += [IncomingMessage("assistant", f"step {i}: " + "edited a file " * 20) for i in range(80)]
    with db.transaction() as session:
        cid = ingest_messages(
            session,
            tenant.tenant_id,
            "loop",
            None,
            prepare_batch(msgs, max_batch=1000, max_chars=10**6),
        ).conversation_id
    settings = CompactionSettings(fresh_tail_count=4)
    with db.session() as session:
        assembled = assemble(session, cid, 500, settings)
    assert assembled.fresh_tail_count == 81
    assert assembled.fresh_tail_overflow
    assert assembled.messages[0]["role"] == "user"
    assert "migrate the whole repo" in str(assembled.messages[0]["content"])


def test_a_leaf_pass_takes_the_same_few_statements_at_any_length(
    db: Database, tenant: IssuedKey
) -> None:
    """A pass's database work does not grow with the conversation, in statements too.

    Reading the context is one joined query (plus the parents of condensed
    summaries when there are any); the pass then reads the secret spans of
    its messages (one query, to mask them in the model's input); the commit
    is the version bump (the row lock), the range swap, then the summary, its
    links, its item, run and usage: one statement on Postgres, one each on
    SQLite (in process).
    """
    from sqlalchemy import event

    settings = CompactionSettings(fresh_tail_count=8, leaf_chunk_tokens=4_000)
    eng = engine(db)
    counts = []
    for n, key in ((60, "short"), (600, "long")):
        cid = fill(db, tenant.tenant_id, n, key=key)
        statements: list[tuple[str, bool]] = []

        def count(*args: object, seen: list[tuple[str, bool]] = statements) -> None:
            sql = str(args[2])
            if not sql.startswith(("PRAGMA", "BEGIN")):  # SQLite's transaction control
                seen.append((sql, bool(args[5])))

        event.listen(db.engine, "before_cursor_execute", count)
        try:
            plan = next_plan(eng, cid, settings, 200_000)
            assert plan is not None
            read = len(statements)
            eng.run_pass(tenant.tenant_id, cid, plan, settings)
        finally:
            event.remove(db.engine, "before_cursor_execute", count)
        counts.append((read, len(statements) - read))
        if db.dialect == "postgresql":
            # executemany on Postgres sends one statement per row.
            assert not any(many for _, many in statements), statements
    assert counts[0] == counts[1]
    read, commit = counts[0]
    assert read == 1  # no condensed summary, no block message here
    # The spans' read first (no span here: no second query for part lengths).
    if db.dialect == "postgresql":
        # The bump, then the range's removal and every row of the pass.
        assert commit == 1 + 2, statements
    else:
        assert commit == 1 + 7, statements

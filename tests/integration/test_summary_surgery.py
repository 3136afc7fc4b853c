"""Summary surgery on real databases: rewrite in place, dissolve losslessly, under the lease.

The DAG is built by the real compaction chain (extractive summaries); the
rewrites go through the real Anthropic SDK to the fake Messages API server.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import select, update

from lcm.assembly import summary_context_tokens
from lcm.compaction.engine import CompactionEngine
from lcm.compaction.inline import run_inline
from lcm.compaction.jobs import CompactionJobs
from lcm.compaction.repository import CompactionRepository
from lcm.compaction.service import record_debt
from lcm.context_store.repository import summary_view
from lcm.db.engine import Database
from lcm.db.models import (
    CompactionDebt,
    ContextItem,
    Conversation,
    Summary,
    SummaryMessage,
    SummaryParent,
)
from lcm.errors import Conflict, InvalidInput, NotFound
from lcm.settings import CompactionSettings, Settings
from lcm.summarize.extractive import ExtractiveProvider
from lcm.summarize.llm import Breakers
from lcm.summarize.summarizer import Summarizer
from lcm.surgery import SurgeryAsk, get_operation, perform_surgery
from lcm.tenants.service import IssuedKey
from tests.fakes import FakeAnthropicServer
from tests.fakes.anthropic_script import Behaviour
from tests.helpers import compact
from tests.integration.test_compaction_engine import assert_lossless, fill

MODEL = "claude-test"
SETTINGS = CompactionSettings(
    fresh_tail_count=8,
    leaf_chunk_tokens=600,
    leaf_min_fanout=4,
    condensed_min_fanout=3,
    summary_prefix_target_tokens=100,
    summary_model=MODEL,
)


@pytest.fixture
def llm() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as server:
        yield server


def deployment(db: Database) -> Settings:
    return db.settings.model_copy(
        update={name: getattr(SETTINGS, name) for name in CompactionSettings.model_fields}
    )


def jobs_on(db: Database, llm: FakeAnthropicServer, owner: str = "surgeon") -> CompactionJobs:
    from tests.fakes.providers import anthropic_provider

    provider = anthropic_provider(llm.base_url, MODEL, breakers=Breakers(5, 30))
    engine = CompactionEngine(db.transaction, Summarizer(provider), reads=db.lookup_session)
    return CompactionJobs(db.transaction, engine, deployment(db), owner=owner)


@pytest.fixture
def dag(db: Database, tenant: IssuedKey) -> int:
    """A conversation compacted into leaves and condensed summaries."""
    cid = fill(db, tenant.tenant_id, 160)
    compact(db, tenant.tenant_id, cid, SETTINGS, 3_000)
    assert in_context(db, cid, "condensed"), "the sweep made no condensed summary"
    return cid


def in_context(db: Database, cid: int, kind: str) -> list[Summary]:
    with db.session() as s:
        return list(
            s.scalars(
                select(Summary)
                .join(ContextItem, ContextItem.summary_id == Summary.id)
                .where(ContextItem.conversation_id == cid, Summary.kind == kind)
                .order_by(ContextItem.ordinal)
            )
        )


def any_leaf(db: Database, cid: int) -> Summary:
    with db.session() as s:
        found = s.scalar(
            select(Summary).where(Summary.conversation_id == cid, Summary.kind == "leaf").limit(1)
        )
        assert found is not None
        return found


def items(db: Database, cid: int) -> list[ContextItem]:
    with db.session() as s:
        return list(
            s.scalars(
                select(ContextItem)
                .where(ContextItem.conversation_id == cid)
                .order_by(ContextItem.ordinal)
            )
        )


def links(db: Database) -> tuple[set[tuple[str, int]], set[tuple[str, str]]]:
    with db.session() as s:
        messages = {(r.summary_id, r.message_id) for r in s.scalars(select(SummaryMessage))}
        parents = {(r.summary_id, r.parent_id) for r in s.scalars(select(SummaryParent))}
    return messages, parents


def get(db: Database, summary_id: str) -> Summary:
    with db.session() as s:
        found = s.get(Summary, summary_id)
        assert found is not None
        return found


def assert_tokens_consistent(db: Database, cid: int) -> None:
    """Each summary item costs what its rendering costs; the total is their sum."""
    with db.session() as s:
        rows = items(db, cid)
        for item in rows:
            if item.summary_id is None:
                continue
            summary = s.get(Summary, item.summary_id)
            assert summary is not None
            parents = s.scalars(
                select(SummaryParent.parent_id)
                .where(SummaryParent.summary_id == summary.id)
                .order_by(SummaryParent.ordinal)
            ).all()
            assert item.token_count == summary_context_tokens(summary_view(summary, parents))
        total = CompactionRepository(s).context_token_total(cid)
    assert total == sum(i.token_count for i in rows)


def surgery(db: Database, llm: FakeAnthropicServer, tenant: IssuedKey, ask: SurgeryAsk) -> Any:
    jobs = jobs_on(db, llm)
    return perform_surgery(db.transaction, lambda: jobs, tenant.tenant_id, ask, "inline")


def test_rewrite_replaces_the_text_and_keeps_id_links_and_references(
    db: Database, tenant: IssuedKey, llm: FakeAnthropicServer, dag: int
) -> None:
    target = in_context(db, dag, "condensed")[0]
    links_before, items_before = links(db), [(i.ordinal, i.summary_id) for i in items(db, dag)]
    llm.set_default(Behaviour.reply("Rewritten: the zanzibar migration was rolled back.\n"))
    op = surgery(db, llm, tenant, SurgeryAsk(target.id, "rewrite", instructions="Name zanzibar."))
    assert (op.status, op.done, op.targets, op.error) == ("done", 1, [target.id], None)
    after = get(db, target.id)
    assert "zanzibar" in after.content
    assert after.content != target.content
    assert (after.kind, after.depth, after.descendant_count) == (
        target.kind,
        target.depth,
        target.descendant_count,
    )
    assert after.rewrites == 1
    assert after.rewritten_at is not None
    assert after.degraded is None
    assert after.model == MODEL
    assert links(db) == links_before  # sources and the references above it unchanged
    assert [(i.ordinal, i.summary_id) for i in items(db, dag)] == items_before
    (request,) = llm.requests
    assert "Name zanzibar." in str(request.system)  # the operator's instructions, in the prompt
    assert_tokens_consistent(db, dag)
    assert_lossless(db, dag)


def test_subtree_rewrite_goes_bottom_up_each_reading_its_rewritten_sources(
    db: Database, tenant: IssuedKey, llm: FakeAnthropicServer, dag: int
) -> None:
    top = max(in_context(db, dag, "condensed"), key=lambda s: s.depth)
    llm.script([Behaviour.reply(f"Rewrite number {i} of the history.\n") for i in range(40)])
    op = surgery(db, llm, tenant, SurgeryAsk(top.id, "rewrite", subtree=True))
    assert op.status == "done", op.error
    assert op.targets[-1] == top.id
    assert len(op.targets) > 1
    depths = [get(db, sid).depth for sid in op.targets]
    assert depths == sorted(depths)  # leaves first
    assert len(llm.requests) == len(op.targets)
    for sid, request in zip(op.targets, llm.requests, strict=True):
        rewritten = get(db, sid)
        assert rewritten.rewrites == 1
        with db.session() as s:
            sources = s.scalars(
                select(SummaryParent.parent_id).where(SummaryParent.summary_id == sid)
            ).all()
        for source in sources:  # it read its sources as rewritten
            assert get(db, source).content.strip() in request.user_text
    assert_tokens_consistent(db, dag)
    assert_lossless(db, dag)


def test_dissolve_puts_the_sources_back_in_order_and_stays_lossless(
    db: Database, tenant: IssuedKey, llm: FakeAnthropicServer, dag: int
) -> None:
    target = in_context(db, dag, "condensed")[0]
    with db.session() as s:
        sources = list(
            s.scalars(
                select(SummaryParent.parent_id)
                .where(SummaryParent.summary_id == target.id)
                .order_by(SummaryParent.ordinal)
            )
        )
        version = s.get(Conversation, dag).context_version  # type: ignore[union-attr]
    before = [i.summary_id or i.message_id for i in items(db, dag)]
    op = surgery(db, llm, tenant, SurgeryAsk(target.id, "dissolve"))
    assert (op.status, op.error) == ("done", None)
    at = before.index(target.id)
    assert [i.summary_id or i.message_id for i in items(db, dag)] == (
        before[:at] + sources + before[at + 1 :]
    )
    assert get(db, target.id).content == target.content  # the row stays, unchanged
    with db.session() as s:
        assert s.get(Conversation, dag).context_version > version  # type: ignore[union-attr]
        debt = s.get(CompactionDebt, dag)
        assert debt is not None
        assert debt.status == "done"
    assert llm.requests == []
    assert_tokens_consistent(db, dag)
    assert_lossless(db, dag)


def test_dissolve_makes_room_when_the_ordinals_after_it_are_taken(
    db: Database, tenant: IssuedKey, llm: FakeAnthropicServer, dag: int
) -> None:
    target = in_context(db, dag, "condensed")[0]
    rows = items(db, dag)
    at = next(i.ordinal for i in rows if i.summary_id == target.id)
    later = [i.id for i in rows if i.ordinal > at]
    with db.transaction() as s:  # close the gap the condensed pass left behind it
        for n, item_id in enumerate(later, 1):
            s.execute(update(ContextItem).where(ContextItem.id == item_id).values(ordinal=at + n))
        s.execute(update(Conversation).where(Conversation.id == dag).values(last_ordinal=at + n))
    before = [i.summary_id or i.message_id for i in items(db, dag)]
    assert surgery(db, llm, tenant, SurgeryAsk(target.id, "dissolve")).status == "done"
    after = items(db, dag)
    assert len(after) == len(before) + len(get_sources(db, target.id)) - 1
    assert [i.ordinal for i in after] == sorted({i.ordinal for i in after})
    with db.session() as s:
        last = s.get(Conversation, dag).last_ordinal  # type: ignore[union-attr]
    assert last == after[-1].ordinal  # the next ingest appends after every item
    assert_tokens_consistent(db, dag)
    assert_lossless(db, dag)


def get_sources(db: Database, summary_id: str) -> list[str]:
    with db.session() as s:
        return list(
            s.scalars(select(SummaryParent.parent_id).where(SummaryParent.summary_id == summary_id))
        )


def test_refusals(db: Database, tenant: IssuedKey, llm: FakeAnthropicServer, dag: int) -> None:
    leaf = any_leaf(db, dag)
    with pytest.raises(Conflict) as refused:
        surgery(db, llm, tenant, SurgeryAsk(leaf.id, "dissolve"))
    assert refused.value.code == "leaf_summary"
    hidden = get_sources(db, in_context(db, dag, "condensed")[0].id)[0]
    with pytest.raises(Conflict) as refused:
        surgery(db, llm, tenant, SurgeryAsk(hidden, "dissolve"))
    assert refused.value.code == "not_in_context"
    with pytest.raises(NotFound):
        surgery(db, llm, tenant, SurgeryAsk("sum_0000000000000000", "rewrite"))
    with pytest.raises(InvalidInput):
        surgery(db, llm, tenant, SurgeryAsk(leaf.id, "rewrite", instructions="x" * 4001))
    from tests.conftest import new_tenant

    other = new_tenant(db, "other")
    with pytest.raises(NotFound):  # another tenant's summary is not found
        surgery(db, llm, other, SurgeryAsk(leaf.id, "rewrite"))


def test_an_llm_outage_fails_the_operation_and_leaves_the_summary(
    db: Database, tenant: IssuedKey, llm: FakeAnthropicServer, dag: int
) -> None:
    target = any_leaf(db, dag)
    llm.set_default("500")
    op = surgery(db, llm, tenant, SurgeryAsk(target.id, "rewrite"))
    assert op.status == "failed"
    assert "unusable" in (op.error or "")
    assert get(db, target.id).content == target.content
    assert get(db, target.id).rewrites == 0


def test_surgery_and_a_compaction_chain_never_hold_the_lease_together(
    db: Database, tenant: IssuedKey, llm: FakeAnthropicServer
) -> None:
    """A surgery chain and a sweep race for one conversation: one lease holder at a time.

    Every LLM call happens under the lease; the calls of the two runners
    never overlap, and the DAG is lossless and consistent afterwards.
    """
    cid = fill(db, tenant.tenant_id, 160)
    compact(db, tenant.tenant_id, cid, SETTINGS, 3_000)
    fill(db, tenant.tenant_id, 60, seed=2)  # more history for the sweep to compact
    target = in_context(db, cid, "condensed")[0]
    llm.set_default(Behaviour.ok(delay=0.05))
    held: list[tuple[str, float, float]] = []
    lock = threading.Lock()

    def recording(jobs: CompactionJobs) -> CompactionJobs:
        summarize = jobs.engine.summarize

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.monotonic()
            try:
                return summarize(*args, **kwargs)
            finally:
                with lock:
                    held.append((jobs.owner, started, time.monotonic()))

        jobs.engine.summarize = timed  # type: ignore[method-assign]
        return jobs

    sweeper, surgeon = (
        recording(jobs_on(db, llm, "sweeper")),
        recording(jobs_on(db, llm, "surgeon")),
    )
    with db.transaction() as s:
        record_debt(s, tenant.tenant_id, cid, "manual", 1_500)
    start = threading.Barrier(2)
    outcomes: dict[str, Any] = {}

    def sweep() -> None:
        start.wait()
        outcomes["sweep"] = run_inline(sweeper, cid)

    def operate() -> None:
        start.wait()
        ask = SurgeryAsk(target.id, "rewrite", subtree=True)
        outcomes["surgery"] = perform_surgery(
            db.transaction, lambda: surgeon, tenant.tenant_id, ask, "inline"
        )

    threads = [threading.Thread(target=sweep), threading.Thread(target=operate)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    # Whoever lost the race left its work on the debt row (a follow-up): run it.
    for _ in range(5):
        if not _owed(db, cid):
            break
        assert run_inline(surgeon, cid) is not None  # nobody else holds the lease now
    with db.session() as s:
        op = get_operation(s, tenant.tenant_id, outcomes["surgery"].operation_id)
    assert op.status == "done", op.error
    # Whichever runner held the lease ran the other's work too (one chain):
    # the surgery is done and the new history was compacted.
    assert all(get(db, sid).rewrites == 1 for sid in op.targets)
    assert len(held) > len(op.targets)
    spans = sorted(held, key=lambda h: h[1])
    for (owner_a, _, end_a), (owner_b, start_b, _) in itertools.pairwise(spans):
        if owner_a != owner_b:
            assert start_b >= end_a, "two runners called the LLM under one lease at once"
    assert_tokens_consistent(db, cid)
    assert_lossless(db, cid)


def _owed(db: Database, cid: int) -> bool:
    with db.session() as s:
        debt = s.get(CompactionDebt, cid)
        return debt is not None and debt.status in ("pending", "running")


def test_extractive_deployment_rewrites_without_an_llm(
    db: Database, tenant: IssuedKey, dag: int
) -> None:
    """No LLM configured (embedded default): the rewrite is the extractive summarizer's."""
    target = in_context(db, dag, "condensed")[0]
    engine = CompactionEngine(db.transaction, Summarizer(ExtractiveProvider()))
    jobs = CompactionJobs(db.transaction, engine, deployment(db), owner="offline")
    op = perform_surgery(
        db.transaction, lambda: jobs, tenant.tenant_id, SurgeryAsk(target.id, "rewrite"), "inline"
    )
    assert op.status == "done", op.error
    assert get(db, target.id).rewrites == 1


def test_later_debt_replaces_a_surgery_reason_so_the_chain_sweeps_after_it(
    db: Database, tenant: IssuedKey
) -> None:
    """A surgery alone ends its chain; any debt that arrives before it runs replaces the reason."""
    cid = fill(db, tenant.tenant_id, 20)
    with db.transaction() as s:
        record_debt(s, tenant.tenant_id, cid, "surgery", None)
    with db.transaction() as s:
        record_debt(s, tenant.tenant_id, cid, "threshold", 1_000)
    with db.session() as s:
        debt = s.get(CompactionDebt, cid)
        assert debt is not None
        assert (debt.reason, debt.status) == ("threshold", "pending")
    with db.transaction() as s:
        record_debt(s, tenant.tenant_id, cid, "surgery", None)  # does not hide the sweep owed
    with db.session() as s:
        assert s.get(CompactionDebt, cid).reason == "threshold"  # type: ignore[union-attr]

"""A pass's writes inside its commit transaction: the lock and fence, the range's
replacement, the run and its usage (shared by compaction passes, repairs and surgery)."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy.orm import Session

from lcm.compaction.planning import PassPlan
from lcm.compaction.repository import CompactionRepository
from lcm.db.models import CompactionRun, ContextItem, LlmUsage, Summary
from lcm.errors import ContextChanged, StaleLease
from lcm.summarize.summarizer import SummaryResult

FenceCheck = Callable[[Session], None]
"""Raises ``StaleLease`` inside the commit transaction if the caller's lease is gone."""


def pass_run(
    tenant_id: str,
    conversation_id: int,
    summary: Summary,
    tokens_in: int,
    tokens_out: int,
    result: SummaryResult,
    duration_ms: int,
) -> CompactionRun:
    """The history row of a pass (or a repair) that wrote ``summary``."""
    return CompactionRun(
        tenant_id=tenant_id,
        conversation_id=conversation_id,
        summary_id=summary.id,
        kind=summary.kind,
        depth=summary.depth,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        duration_ms=duration_ms,
        escalation=result.escalation,
    )


def record_pass(
    repo: CompactionRepository,
    tenant_id: str,
    conversation_id: int,
    summary: Summary,
    tokens_in: int,
    tokens_out: int,
    result: SummaryResult,
    duration_ms: int,
) -> None:
    """The pass's run and its LLM usage, in the pass's commit (a repair's)."""
    repo.record_run(
        pass_run(tenant_id, conversation_id, summary, tokens_in, tokens_out, result, duration_ms)
    )
    repo.record_usage(LlmUsage.from_calls(tenant_id, conversation_id, "summary", result.usage))


def lock_and_fence(
    repo: CompactionRepository,
    session: Session,
    conversation_id: int,
    fence: FenceCheck | None,
) -> None:
    """Inside the commit transaction, first: lock the conversation, then check the lease.

    Leaves ``context_version`` bumped: the caller replaces the range, or the
    transaction rolls back.
    """
    # The row lock (taken by the version bump) serializes this commit with
    # ingest and with any other pass on the conversation; the range is read
    # (and replaced) only after it, by a statement that sees settled state.
    if not repo.bump_context_version(conversation_id):
        # Erased while the summarizer ran: the lease went with its debt row.
        raise StaleLease(f"conversation {conversation_id} was erased during the pass")
    if fence is not None:
        fence(session)


def replace_range(
    repo: CompactionRepository,
    plan: PassPlan,
    summary: Summary,
    item_tokens: int,
    result: SummaryResult,
    duration_ms: int,
) -> None:
    """The pass's write, then the check that the range it removed is what ``plan`` read.

    The range's removal, the summary, its links, its item in the range's
    place, the run and its usage go in together (one statement on
    Postgres). A mismatch raises ``ContextChanged``, which rolls back the
    removal and every row written with it.
    """
    tenant_id, conversation_id = summary.tenant_id, summary.conversation_id
    removed = repo.replace_range(
        plan.last_ordinal,
        summary,
        plan.message_ids if plan.kind == "leaf" else plan.summary_ids,
        ContextItem(
            tenant_id=tenant_id,
            conversation_id=conversation_id,
            ordinal=plan.first_ordinal,
            item_type="summary",
            summary_id=summary.id,
            token_count=item_tokens,
        ),
        pass_run(
            tenant_id,
            conversation_id,
            summary,
            plan.source_tokens,
            item_tokens,
            result,
            duration_ms,
        ),
        LlmUsage.from_calls(tenant_id, conversation_id, "summary", result.usage),
    )
    if removed != _planned_range(plan):
        raise ContextChanged(
            f"context items {plan.first_ordinal}..{plan.last_ordinal} changed during the pass"
        )


def _planned_range(plan: PassPlan) -> list[tuple[int, int | None, str | None]]:
    """``(ordinal, message_id, summary_id)`` of the items ``plan`` read, in order."""
    return [
        (e.ordinal, e.message.id if e.message else None, e.summary.id if e.summary else None)
        for e in plan.entries
    ]

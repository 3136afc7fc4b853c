"""What the console's pages show, as plain data built from the domain's own reads.

Nothing here knows about HTTP or HTML: the API's console routes render these.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from lcm.assembly.service import assemble
from lcm.compaction.debt_statements import FAILED, PENDING, RUNNING
from lcm.console.repository import (
    ConsoleRepository,
    ConversationRow,
    DebtRow,
    RunRow,
    SortColumn,
)
from lcm.context import MessageView
from lcm.conversations.dag_repository import DagRepository
from lcm.conversations.repository import ConversationRepository
from lcm.db.models import Conversation
from lcm.errors import NotFound
from lcm.policy.threshold import evaluate_threshold
from lcm.retrieval.repository import HistoryRepository
from lcm.secrets import masked_views
from lcm.settings import CompactionSettings, ModelPrice
from lcm.tenants.usage import estimate_cost

PAGE_SIZE = 50


@dataclass(frozen=True, slots=True)
class ConversationLine:
    row: ConversationRow
    threshold_tokens: int
    summaries_by_depth: dict[int, int]
    last_run_at: datetime | None


@dataclass(frozen=True, slots=True)
class ConversationTable:
    lines: list[ConversationLine]
    total: int
    page: int
    pages: int


def conversation_table(
    session: Session,
    tenant_id: str,
    settings: CompactionSettings,
    default_budget: int,
    *,
    key_prefix: str | None,
    sort: SortColumn,
    descending: bool,
    page: int,
) -> ConversationTable:
    repo = ConsoleRepository(session)
    rows, total = repo.conversation_page(
        tenant_id,
        key_prefix=key_prefix,
        sort=sort,
        descending=descending,
        offset=(page - 1) * PAGE_SIZE,
        limit=PAGE_SIZE,
    )
    ids = [r.id for r in rows]
    depths, runs = repo.summaries_by_depth(ids), repo.last_runs(ids)
    lines = [
        ConversationLine(
            r,
            evaluate_threshold(
                r.context_tokens, r.debt_budget or default_budget, settings
            ).threshold_tokens,
            dict(sorted(depths.get(r.id, {}).items())),
            runs.get(r.id),
        )
        for r in rows
    ]
    return ConversationTable(lines, total, page, max(1, -(-total // PAGE_SIZE)))


@dataclass(frozen=True, slots=True)
class LiveDebts:
    """The console's live page: the tenant's debt counts, what is owed and what failed."""

    counts: dict[str, int]
    owed: list[DebtRow]  # pending or running, oldest change first
    failed: list[DebtRow]


def live_debts(session: Session, tenant_id: str, rows: int) -> LiveDebts:
    repo = ConsoleRepository(session)
    owed = repo.debts(tenant_id, (PENDING, RUNNING), rows)
    counts = repo.debt_counts(tenant_id)
    return LiveDebts(counts, owed, repo.debts(tenant_id, (FAILED,), rows))


def conversation_of(session: Session, tenant_id: str, conversation_id: int) -> Conversation:
    """The tenant's conversation, or ``NotFound`` (another tenant's id reads as missing)."""
    found = ConversationRepository(session).get(tenant_id, conversation_id)
    if found is None:
        raise NotFound(f"no conversation {conversation_id}")
    return found


@dataclass(frozen=True, slots=True)
class ContextWindow:
    """The context as assembled for ``budget``: what the bar shows."""

    budget: int
    estimated_tokens: int
    summary_count: int
    summary_tokens: int
    middle_count: int  # raw messages older than the fresh tail that still fit
    middle_tokens: int
    fresh_tail_count: int
    fresh_tail_tokens: int
    evicted_count: int
    fresh_tail_overflow: bool


def context_window(
    session: Session, conversation_id: int, budget: int, settings: CompactionSettings
) -> ContextWindow:
    """``assemble`` for ``budget``, and the token split of what it kept.

    ``assemble`` gives the totals; the split walks the context from the fresh
    tail back as the assembler does, over the items' stored token counts.
    """
    assembled = assemble(session, conversation_id, budget, settings)
    items = DagRepository(session).context(conversation_id)
    tail_start = len(items) - assembled.fresh_tail_count
    tail_tokens = sum(tokens for _, _, tokens in items[tail_start:])
    room, kept_from = budget - tail_tokens, tail_start
    while kept_from > 0 and items[kept_from - 1][2] <= room:
        room -= items[kept_from - 1][2]
        kept_from -= 1
    kept = items[kept_from:tail_start]
    summaries = [tokens for summary_id, _, tokens in kept if summary_id is not None]
    middle = [tokens for summary_id, _, tokens in kept if summary_id is None]
    return ContextWindow(
        budget=budget,
        estimated_tokens=assembled.estimated_tokens,
        summary_count=len(summaries),
        summary_tokens=sum(summaries),
        middle_count=len(middle),
        middle_tokens=sum(middle),
        fresh_tail_count=assembled.fresh_tail_count,
        fresh_tail_tokens=tail_tokens,
        evicted_count=kept_from,
        fresh_tail_overflow=assembled.fresh_tail_overflow,
    )


@dataclass(frozen=True, slots=True)
class RunLine:
    run: RunRow
    cost_usd: float | None  # None: unpriced model, or no summary to name the model


@dataclass(frozen=True, slots=True)
class RunTimeline:
    lines: list[RunLine]
    total: int
    page: int
    pages: int


def run_timeline(
    session: Session, conversation_id: int, prices: Mapping[str, ModelPrice], page: int
) -> RunTimeline:
    rows, total = ConsoleRepository(session).runs(
        conversation_id, offset=(page - 1) * PAGE_SIZE, limit=PAGE_SIZE
    )
    lines = [
        RunLine(
            r,
            None if r.model is None else estimate_cost(r.model, r.tokens_in, r.tokens_out, prices),
        )
        for r in rows
    ]
    return RunTimeline(lines, total, page, max(1, -(-total // PAGE_SIZE)))


@dataclass(frozen=True, slots=True)
class MessagePage:
    messages: list[MessageView]
    first_seq: int
    last_seq: int
    total: int  # messages in the conversation
    around: int | None  # the seq asked for


def message_page(
    session: Session,
    conversation: Conversation,
    first_seq: int,
    around: int | None = None,
    mask: bool = True,
) -> MessagePage:
    """``PAGE_SIZE`` messages from ``first_seq`` (clamped into the conversation)."""
    total = conversation.last_seq
    first = max(1, min(first_seq, max(1, total - PAGE_SIZE + 1)))
    last = min(total, first + PAGE_SIZE - 1)
    ids = ConsoleRepository(session).message_ids(conversation.id, first, last)
    views = HistoryRepository(session).message_views(ids)
    # Shown with their detected secrets masked, as every other surface shows them.
    shown = [views[i] for i in ids if i in views]
    if mask:  # unless the tenant unmasked its console surface
        shown = masked_views(session, conversation.tenant_id, shown)
    return MessagePage(shown, first, last, total, around)


def leaf_sources(
    session: Session, tenant_id: str, summary_id: str, offset: int, mask: bool = True
) -> tuple[list[MessageView], int]:
    """A page of a leaf summary's original messages (with their parts, secrets masked), and
    how many it has."""
    repo = HistoryRepository(session)
    sizes = repo.leaf_messages([summary_id]).get(summary_id, [])
    ids = [m.id for m in sizes[offset : offset + PAGE_SIZE]]
    views = repo.message_views(ids)
    shown = [views[i] for i in ids if i in views]
    return (masked_views(session, tenant_id, shown) if mask else shown), len(sizes)

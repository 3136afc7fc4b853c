"""Re-summarizing a degraded summary in place, once the LLM answers again.

A repair keeps the DAG's shape: the summary keeps its id, its links to its
sources and every reference to it (from context items and from the condensed
summaries above it); only its content, token count, model and escalation are
replaced. Like a compaction pass it reads, calls the LLM with no transaction
open, then writes in one short transaction that re-checks the lease (the
compaction debt row's, see ``lcm/compaction/jobs.py``) and that the summary
is still the degraded one it read.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from sqlalchemy.orm import Session

from lcm.assembly import summary_context_tokens
from lcm.compaction.engine import CompactionEngine, PassOutcome
from lcm.compaction.pass_writes import FenceCheck, record_pass
from lcm.compaction.repair_repository import RepairRepository
from lcm.compaction.repository import CompactionRepository
from lcm.compaction.source import render_messages, render_summaries
from lcm.context_store.repository import summary_view
from lcm.db.models import Summary
from lcm.errors import ContextChanged, StaleLease, SummarizerError
from lcm.secrets.service import content_masks
from lcm.settings import CompactionSettings
from lcm.summarize.summarizer import SummaryResult
from lcm.timezones import DEFAULT_TIMEZONE


@dataclass(frozen=True, slots=True)
class RepairTarget:
    summary_id: str
    kind: str
    depth: int
    content: str  # as read: the write re-checks it (a concurrent repair won)
    source_text: str
    source_tokens: int


class SummaryRepair:
    """Finds and repairs a conversation's degraded summaries, one per call."""

    def __init__(self, engine: CompactionEngine) -> None:
        self.engine = engine

    def next_target(
        self, conversation_id: int, timezone: str = DEFAULT_TIMEZONE
    ) -> RepairTarget | None:
        with self.engine.transaction() as session:
            repo = RepairRepository(session)
            summary = repo.next_to_repair(conversation_id)
            if summary is None:
                return None
            text = sources_text(session, summary, timezone)
            return RepairTarget(
                summary.id,
                summary.kind,
                summary.depth,
                summary.content,
                text,
                summary.source_token_count,
            )

    def repair(
        self,
        tenant_id: str,
        conversation_id: int,
        target: RepairTarget,
        settings: CompactionSettings,
        fence: FenceCheck,
    ) -> PassOutcome:
        """Re-summarize ``target``; raise ``SummarizerError`` while the LLM is still unusable."""
        started = time.perf_counter()
        result = self.engine.summarize(
            tenant_id,
            target.source_text,
            depth=target.depth,
            target_tokens=(
                settings.leaf_target_tokens
                if target.kind == "leaf"
                else settings.condensed_target_tokens
            ),
            previous_context=None,
            settings=settings,
        )
        if result.degraded is not None:
            # Writing it would swap one degraded summary for another; the job
            # fails and its debt retries with backoff until the LLM is back.
            raise SummarizerError(f"the LLM is still unusable ({result.degraded})")
        duration_ms = int((time.perf_counter() - started) * 1000)
        with self.engine.transaction() as session:
            return self._write(
                session, tenant_id, conversation_id, target, result, fence, duration_ms
            )

    @staticmethod
    def _write(
        session: Session,
        tenant_id: str,
        conversation_id: int,
        target: RepairTarget,
        result: SummaryResult,
        fence: FenceCheck,
        duration_ms: int,
    ) -> PassOutcome:
        compaction = CompactionRepository(session)
        # The conversation row lock orders this write with ingest and passes.
        if compaction.lock_conversation(conversation_id) is None:
            raise StaleLease(f"conversation {conversation_id} was erased during the repair")
        fence(session)
        repo = RepairRepository(session)
        summary = repo.get_locked(target.summary_id)
        if summary is None or summary.degraded is None or summary.content != target.content:
            raise ContextChanged(f"summary {target.summary_id} changed during the repair")
        summary.content = result.text
        summary.token_count = result.token_count
        summary.model = result.model
        summary.escalation = result.escalation
        summary.degraded = None
        session.flush()  # the search rows follow the content (trigger / generated column)
        item_tokens = summary_context_tokens(summary_view(summary, repo.parent_ids(summary.id)))
        if repo.set_item_tokens(summary.id, item_tokens):
            repo.bump_context_version(conversation_id)  # what assembly shows has changed
        record_pass(
            compaction,
            tenant_id,
            conversation_id,
            summary,
            target.source_tokens,
            result.token_count,
            result,
            duration_ms,
        )
        return PassOutcome(
            tenant_id,
            summary.id,
            "repair",
            summary.depth,
            target.source_tokens,
            item_tokens,
            result.escalation,
            result.model,
            duration_ms,
            sum(u.input_tokens for u in result.usage),
            sum(u.output_tokens for u in result.usage),
        )


def sources_text(session: Session, summary: Summary, timezone: str) -> str:
    """The summarizer's input for writing ``summary`` again from its sources.

    Masked, as a pass's input is: the text leaves for a third-party model.
    """
    repo = RepairRepository(session)
    if summary.kind == "leaf":
        messages = repo.source_messages(summary.id)
        masks = content_masks(session, summary.tenant_id, [m.id for m in messages])
        return render_messages(messages, timezone=timezone, masks=masks)
    return render_summaries(repo.source_summaries(summary.id), timezone)

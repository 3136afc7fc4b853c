"""An operator's summary surgery, run as passes of the conversation's compaction chain.

Two operations (``summary_operations`` rows, asked for by ``lcm/surgery``):

* **rewrite**: a summary (or it and every summary below it, bottom-up, so
  each rewritten summary reads its rewritten sources) is summarized again
  from its sources, with the operator's instructions added to the prompt.
  Like a doctor repair (``repair.py``) it keeps the summary's id, its links
  to its sources and every reference to it; content and token count change,
  ``rewritten_at`` and ``rewrites`` record it.
* **dissolve**: a condensed summary's context item is replaced by its source
  summaries, in order. The summary row stays: whatever references it still
  resolves; it is only no longer in the context.

Each pass holds the conversation's lease (the compaction debt row), so it
never runs beside a sweep, a repair or another surgery of the conversation;
it reads, calls the LLM with no transaction open, then writes in one short
transaction that re-checks the fence and what it read.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from sqlalchemy.orm import Session

from lcm.assembly import summary_context_tokens
from lcm.compaction.debt_repository import Claim
from lcm.compaction.engine import CompactionEngine, PassOutcome
from lcm.compaction.pass_writes import FenceCheck, record_pass
from lcm.compaction.repair import sources_text
from lcm.compaction.repair_repository import RepairRepository
from lcm.compaction.repository import CompactionRepository
from lcm.compaction.steps import Step, StepAction
from lcm.compaction.surgery_repository import DONE, FAILED, PENDING, SurgeryRepository
from lcm.compaction.sweep import ChainPosition
from lcm.context_store.repository import summary_view
from lcm.db.models import ContextItem, Summary, SummaryOperation, utcnow
from lcm.errors import ContextChanged, StaleLease
from lcm.settings import CompactionSettings
from lcm.summarize.summarizer import SummaryResult
from lcm.timezones import DEFAULT_TIMEZONE

log = logging.getLogger(__name__)

# The pass kind (``lcm.job_types.PASS_JOBS``) whose job runs surgery.
SURGERY_PASS = "surgery"


@dataclass(frozen=True, slots=True)
class SurgeryTarget:
    """One pass of an operation: the summary it works on, as read."""

    operation_id: str
    action: str  # rewrite | dissolve
    step: int  # the operation's ``done`` when read: the write re-checks it
    summary_id: str
    kind: str
    depth: int
    content: str
    source_text: str  # rewrite: the rendered sources
    source_tokens: int
    instructions: str | None


class SurgeryFailed(Exception):
    """The operation cannot go on; its row ends ``failed`` with this message."""


class SummarySurgery:
    """Finds and runs a conversation's pending surgery, one pass per call."""

    def __init__(self, engine: CompactionEngine) -> None:
        self.engine = engine

    def step(
        self,
        claim: Claim,
        settings: CompactionSettings,
        kind: str | None,
        position: ChainPosition,
        fence: FenceCheck,
    ) -> Step | None:
        """One surgery pass under ``claim``; ``None`` once none is pending.

        A job of another kind hands the lease to a surgery job, so Flower
        shows surgery as ``compaction.surgery``.
        """
        target = self.next_target(claim.conversation_id, settings.timezone)
        if target is None:
            return None
        cid, token = claim.conversation_id, claim.fencing_token
        if kind is not None and kind != SURGERY_PASS:
            return Step(StepAction.PASS, cid, SURGERY_PASS, token, position=position)
        try:
            outcome = self.run(claim.tenant_id, cid, target, settings, fence)
        except StaleLease as exc:
            # Another holder took over: nothing was written, the fence did its job.
            log.info("surgery for conversation %s dropped: %s", cid, exc)
            return Step(StepAction.NOOP, cid)
        except ContextChanged:
            outcome = None  # what it read changed (a duplicate pass, a repair): read again
        return Step(
            StepAction.PASS, cid, SURGERY_PASS, token, outcome=outcome, position=position.counted()
        )

    def next_target(
        self, conversation_id: int, timezone: str = DEFAULT_TIMEZONE
    ) -> SurgeryTarget | None:
        """The next pass of the oldest pending operation; ``None`` when none is pending.

        Every chain's first pass asks, so this is a read session (on SQLite no
        write lock is taken); the pass's write re-checks what it read here.
        """
        with self.engine.reads() as session:
            repo = SurgeryRepository(session)
            operation = repo.next_pending(conversation_id)
            if operation is None:
                return None
            summary_id = (
                operation.targets[operation.done]
                if operation.action == "rewrite"
                else operation.summary_id
            )
            summary = repo.summary(summary_id)
            if summary is None:  # erased meanwhile: the conversation's erasure runs
                return SurgeryTarget(
                    operation.id, "missing", operation.done, summary_id, "", 0, "", "", 0, None
                )
            text = ""
            if operation.action == "rewrite":
                text = sources_text(session, summary, timezone)
            return SurgeryTarget(
                operation.id,
                operation.action,
                operation.done,
                summary.id,
                summary.kind,
                summary.depth,
                summary.content,
                text,
                summary.source_token_count,
                operation.instructions,
            )

    def run(
        self,
        tenant_id: str,
        conversation_id: int,
        target: SurgeryTarget,
        settings: CompactionSettings,
        fence: FenceCheck,
    ) -> PassOutcome | None:
        """One pass of ``target``'s operation; a failure ends the operation, not the chain.

        Raises ``StaleLease`` (the lease was lost: nothing written) and
        ``ContextChanged`` (what it read changed: the next pass reads again).
        """
        try:
            if target.action == "rewrite":
                return self._rewrite(tenant_id, conversation_id, target, settings, fence)
            if target.action == "dissolve":
                with self.engine.transaction() as session:
                    self._dissolve(session, conversation_id, target, fence)
                return None
            raise SurgeryFailed(f"summary {target.summary_id} no longer exists")
        except (StaleLease, ContextChanged):
            raise
        except Exception as exc:  # the LLM down, the budget spent, a refusal
            message = str(exc) if isinstance(exc, SurgeryFailed) else f"{type(exc).__name__}: {exc}"
            with self.engine.transaction() as session:
                _check(session, conversation_id, target, fence)
                _finish(_pending(session, target), FAILED, message)
            return None

    def _rewrite(
        self,
        tenant_id: str,
        conversation_id: int,
        target: SurgeryTarget,
        settings: CompactionSettings,
        fence: FenceCheck,
    ) -> PassOutcome:
        started = time.perf_counter()
        leaf = target.kind == "leaf"
        result = self.engine.summarize(
            tenant_id,
            target.source_text,
            depth=target.depth,
            target_tokens=settings.leaf_target_tokens if leaf else settings.condensed_target_tokens,
            previous_context=None,
            settings=settings,
            instructions=target.instructions,
        )
        if result.degraded is not None:
            # A truncation or an extractive text is no rewrite: keep the summary as it is.
            raise SurgeryFailed(f"the LLM is unusable ({result.degraded}); summary unchanged")
        duration_ms = int((time.perf_counter() - started) * 1000)
        with self.engine.transaction() as session:
            summary, tokens = _store_rewrite(
                session, tenant_id, conversation_id, target, result, fence
            )
            record_pass(
                CompactionRepository(session),
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
            target.summary_id,
            "rewrite",
            target.depth,
            target.source_tokens,
            tokens,
            result.escalation,
            result.model,
            duration_ms,
            sum(u.input_tokens for u in result.usage),
            sum(u.output_tokens for u in result.usage),
        )

    @staticmethod
    def _dissolve(
        session: Session, conversation_id: int, target: SurgeryTarget, fence: FenceCheck
    ) -> None:
        """The summary's context item out, its source summaries in at its place, in order."""
        _check(session, conversation_id, target, fence)
        operation = _pending(session, target)
        repo = SurgeryRepository(session)
        item = repo.context_item(conversation_id, target.summary_id)
        if item is None:
            raise SurgeryFailed(f"summary {target.summary_id} is not in the current context")
        sources = repo.sources([target.summary_id])[target.summary_id]
        if target.kind == "leaf" or not sources:
            raise SurgeryFailed(f"summary {target.summary_id} has no source summaries")
        rows, links = repo.summaries(sources), repo.sources(sources)
        # Ordinals only grow and a condensed pass leaves a gap the size of the
        # range it took, so its sources fit back; if not, later items move on.
        following = repo.next_ordinal_after(conversation_id, item.ordinal)
        room = len(sources) if following is None else following - item.ordinal
        if room < len(sources):
            repo.shift_after(conversation_id, item.ordinal, len(sources) - room)
        replacements = [
            ContextItem(
                tenant_id=item.tenant_id,
                conversation_id=conversation_id,
                ordinal=item.ordinal + i,
                item_type="summary",
                summary_id=sid,
                token_count=summary_context_tokens(summary_view(rows[sid], links[sid])),
            )
            for i, sid in enumerate(sources)
        ]
        repo.replace_item(item, replacements)
        RepairRepository(session).bump_context_version(conversation_id)
        _finish(operation, DONE, None)


def _store_rewrite(
    session: Session,
    tenant_id: str,
    conversation_id: int,
    target: SurgeryTarget,
    result: SummaryResult,
    fence: FenceCheck,
) -> tuple[Summary, int]:
    """The new text in place, checked; the summary and what its context item costs now."""
    _check(session, conversation_id, target, fence)
    operation = _pending(session, target)
    summary = SurgeryRepository(session).summary_locked(target.summary_id)
    if summary is None or summary.content != target.content:
        raise ContextChanged(f"summary {target.summary_id} changed during the rewrite")
    summary.content = result.text
    summary.token_count = result.token_count
    summary.model = result.model
    summary.escalation = result.escalation
    summary.degraded = None
    summary.rewritten_at = utcnow()
    summary.rewrites = (summary.rewrites or 0) + 1
    session.flush()  # the search rows follow the content (trigger / generated column)
    repo = RepairRepository(session)
    tokens = summary_context_tokens(summary_view(summary, repo.parent_ids(summary.id)))
    if repo.set_item_tokens(summary.id, tokens):
        repo.bump_context_version(conversation_id)  # what assembly shows has changed
    operation.done += 1
    if operation.done >= len(operation.targets):
        _finish(operation, DONE, None)
    else:
        operation.updated_at = utcnow()
    return summary, tokens


def _check(
    session: Session, conversation_id: int, target: SurgeryTarget, fence: FenceCheck
) -> None:
    """The conversation row lock, then the fence: the order of every pass's commit."""
    if CompactionRepository(session).lock_conversation(conversation_id) is None:
        raise StaleLease(f"conversation {conversation_id} was erased during the surgery")
    fence(session)


def _pending(session: Session, target: SurgeryTarget) -> SummaryOperation:
    """The operation, still at the step ``target`` read (a duplicate pass finds it moved on)."""
    operation = SurgeryRepository(session).operation(target.operation_id, None)
    if operation is None or operation.status != PENDING or operation.done != target.step:
        raise ContextChanged(f"operation {target.operation_id} moved on")
    return operation


def _finish(operation: SummaryOperation, status: str, error: str | None) -> None:
    operation.status = status
    operation.error = None if error is None else error[:2000]
    operation.updated_at = operation.finished_at = utcnow()


__all__ = ["SummarySurgery", "SurgeryTarget"]

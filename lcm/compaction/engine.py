"""Running compaction passes against the database.

A pass is three steps, and no database transaction spans the LLM call:

1. read the context (a short read transaction) and plan the pass;
2. summarize the planned range (no transaction open: this can take seconds);
3. in one short write transaction: lock the conversation row (bumping
   ``context_version``), check the caller's fence (a lease still held),
   remove the planned range and write the summary, its links and the one
   summary item in the range's place, the run and its LLM usage (one
   statement on Postgres), check that what was removed is exactly what was
   read, then settle whatever the caller settles with the pass (e.g.
   releasing a sweep's lease).

If step 3's checks fail, nothing is kept (``ContextChanged`` / ``StaleLease``
roll the transaction back): the summary is discarded and the next pass
replans from the committed state. The engine never commits itself:
``transaction`` is supplied by the entrypoint that owns the work (a task, a
request) and commits when its block exits cleanly.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from sqlalchemy import select
from sqlalchemy.orm import Session

from lcm.assembly import summary_context_tokens
from lcm.compaction.pass_writes import FenceCheck, lock_and_fence, replace_range
from lcm.compaction.planning import PassPlan
from lcm.compaction.repository import CompactionRepository
from lcm.compaction.source import (
    StoredRange,
    leaf_range,
    new_summary_id,
    render_source,
    summary_span,
    union_ranges,
    wrapper_tokens,
)
from lcm.context import ContextEntry
from lcm.context_store.repository import summary_view
from lcm.db.engine import Transaction
from lcm.db.models import Summary
from lcm.errors import ContextChanged
from lcm.files.extraction import FILE_ID_RE
from lcm.secrets.masking import SecretSpan
from lcm.secrets.service import DetectionRules, content_masks, erased_since, mask_detected
from lcm.semantic.backfill import request_embedding
from lcm.settings import CompactionSettings, TenantSettings
from lcm.summarize.policy import SummaryPolicy
from lcm.summarize.summarizer import Summarizer, SummaryResult
from lcm.tenants.spend import llm_budget_exhausted
from lcm.tokens import estimate_tokens

FILE_ID_PREFIX = "file_"  # every match of ``FILE_ID_RE`` contains it

Settle = Callable[[Session, ContextEntry], None]
"""Runs last in a pass's commit transaction, given the entry that replaced the range."""


@dataclass(frozen=True, slots=True)
class PassOutcome:
    tenant_id: str
    summary_id: str
    kind: str
    depth: int
    tokens_in: int
    tokens_out: int
    escalation: str
    model: str
    duration_ms: int
    llm_input_tokens: int = 0
    llm_output_tokens: int = 0
    degraded: str | None = None  # why no LLM wrote it (``SummaryResult.degraded``)
    # The context entry that replaced the range (lets a caller update its
    # copy of the context without reading it again).
    entry: ContextEntry | None = None


class CompactionEngine:
    """Executes planned passes; plans come from :mod:`lcm.compaction.sweep`."""

    def __init__(
        self, transaction: Transaction, summarizer: Summarizer, *, reads: Transaction | None = None
    ) -> None:
        """``reads`` opens the sessions the context is read in (``transaction`` if None).

        A process passes ``Database.lookup_session``: the read's statements
        each see their own snapshot, as in a READ COMMITTED transaction, so
        one would add only its BEGIN and COMMIT round trips (0.1-0.2 ms of a
        pass); the commit re-checks the range it replaces under the row lock.
        """
        self.transaction = transaction
        self.reads = reads or transaction
        self.summarizer = summarizer

    def load(self, conversation_id: int) -> list[ContextEntry]:
        with self.reads() as session:
            return CompactionRepository(session).load_entries(conversation_id)

    def run_pass(
        self,
        tenant_id: str,
        conversation_id: int,
        plan: PassPlan,
        settings: CompactionSettings | TenantSettings,
        *,
        fence: FenceCheck | None = None,
        then: Settle | None = None,
    ) -> PassOutcome:
        """Summarize ``plan``'s range and commit it if the range is unchanged.

        ``then`` runs last inside the commit transaction with the entry that
        replaced the range (a sweep releases its lease there when this was
        its last pass), so it commits, or rolls back, with the pass.
        """
        started = time.perf_counter()
        result = self.summarize(
            tenant_id,
            render_source(
                plan,
                settings.strip_injected_context_tags,
                settings.timezone,
                self.secret_masks(tenant_id, plan, settings),
            ),
            # The summary's item must cost less than the range it replaces:
            # a pass never grows the context it compacts.
            must_beat_tokens=plan.source_tokens - wrapper_tokens(plan),
            depth=plan.depth,
            target_tokens=(
                settings.leaf_target_tokens
                if plan.kind == "leaf"
                else settings.condensed_target_tokens
            ),
            previous_context=plan.previous_summary.content if plan.previous_summary else None,
            settings=settings,
        )
        duration_ms = int((time.perf_counter() - started) * 1000)
        with self.transaction() as session:
            outcome = self._commit(
                session, tenant_id, conversation_id, plan, result, duration_ms, fence
            )
            if then is not None and outcome.entry is not None:
                then(session, outcome.entry)
            return outcome

    def secret_masks(
        self, tenant_id: str, plan: PassPlan, settings: CompactionSettings
    ) -> dict[int, list[SecretSpan]]:
        """The spans of the secrets in ``plan``'s messages: the model never sees one.

        One short read before the call (none for a condensed pass, or unmasked).
        """
        views = {e.message.id: e.message for e in plan.entries if e.message is not None}
        if not views or not settings.masks_secrets("summarizer"):
            return {}
        with self.reads() as session:
            masks = content_masks(session, tenant_id, list(views))
        if (erased := erased_since(views, masks)) is not None:  # spans moved by an erasure
            raise ContextChanged(f"a secret of message {erased} was erased meanwhile")
        return masks

    def summarize(
        self,
        tenant_id: str,
        source_text: str,
        *,
        depth: int,
        target_tokens: int,
        previous_context: str | None,
        settings: CompactionSettings | TenantSettings,
        must_beat_tokens: int | None = None,
        instructions: str | None = None,
    ) -> SummaryResult:
        """One summary at the tenant's effective settings, offline once its LLM budget is spent.

        The spend guard reads ``llm_usage`` in its own short transaction,
        before the call: no transaction is open while the LLM works.
        ``instructions`` (an operator's rewrite) follow the tenant's own.
        """
        offline = False
        if isinstance(settings, TenantSettings) and settings.llm_daily_token_budget is not None:
            with self.transaction() as session:
                offline = llm_budget_exhausted(session, tenant_id, settings, "summary")
        policy = SummaryPolicy.of(settings, offline=offline)
        if instructions and instructions.strip():
            own = policy.custom_instructions or ""
            policy = replace(policy, custom_instructions=f"{own}\n\n{instructions}".strip())
        result = self.summarizer.summarize(
            source_text,
            depth=depth,
            target_tokens=target_tokens,
            previous_context=previous_context,
            must_beat_tokens=must_beat_tokens,
            policy=policy,
        )
        # The output too: a summary never holds a detected secret (unless unmasked).
        if not settings.masks_secrets("summarizer"):
            return result
        text = mask_detected(result.text, DetectionRules.of(settings))
        if text == result.text:
            return result
        return replace(result, text=text, token_count=estimate_tokens(text))

    def _commit(
        self,
        session: Session,
        tenant_id: str,
        conversation_id: int,
        plan: PassPlan,
        result: SummaryResult,
        duration_ms: int,
        fence: FenceCheck | None,
    ) -> PassOutcome:
        """Check and write the pass: the summary, its links, the context swap, run and usage.

        A failed check raises (``ContextChanged`` / ``StaleLease``) and the
        transaction rolls back: nothing of the pass is kept.
        """
        repo = CompactionRepository(session)
        lock_and_fence(repo, session, conversation_id, fence)
        summary = self._summary_row(session, tenant_id, conversation_id, plan, result)
        view = summary_view(summary, plan.summary_ids)
        item_tokens = summary_context_tokens(view)
        replace_range(repo, plan, summary, item_tokens, result, duration_ms)
        request_embedding(session, conversation_id)  # semantic recall, after commit
        return PassOutcome(
            tenant_id,
            summary.id,
            plan.kind,
            plan.depth,
            plan.source_tokens,
            item_tokens,
            result.escalation,
            result.model,
            duration_ms,
            sum(u.input_tokens for u in result.usage),
            sum(u.output_tokens for u in result.usage),
            result.degraded,
            ContextEntry(plan.first_ordinal, item_tokens, summary=view),
        )

    @staticmethod
    def _summary_row(
        session: Session,
        tenant_id: str,
        conversation_id: int,
        plan: PassPlan,
        result: SummaryResult,
    ) -> Summary:
        earliest, latest, descendants = summary_span(plan)
        if plan.kind == "leaf":
            file_ids, (count, first, last) = _leaf_sources(plan)
        else:
            file_ids, (count, first, last) = _condensed_sources(session, plan)
        return Summary(
            id=new_summary_id(),
            tenant_id=tenant_id,
            conversation_id=conversation_id,
            kind=plan.kind,
            depth=plan.depth,
            content=result.text,
            token_count=result.token_count,
            source_token_count=plan.source_tokens,
            earliest_at=earliest,
            latest_at=latest,
            descendant_count=descendants,
            file_ids=file_ids,
            escalation=result.escalation,
            model=result.model,
            degraded=result.degraded,
            source_message_count=count,
            source_first_seq=first,
            source_last_seq=last,
        )


def _leaf_sources(plan: PassPlan) -> tuple[list[str], StoredRange]:
    """A leaf's large files and source range, from its messages.

    Large files referenced by the summarized messages stay findable from
    the summary (and from every summary condensed from it). The substring
    test first: most messages name no file, and it costs 0.3 µs where the
    pattern's scan of a 400-character message costs 20 µs (a leaf of 120
    messages: 2.4 ms of CPU).
    """
    messages = [e.message for e in plan.entries if e.message is not None]
    file_ids = sorted(
        {
            fid
            for m in messages
            if FILE_ID_PREFIX in m.content
            for fid in FILE_ID_RE.findall(m.content)
        }
    )
    return file_ids, leaf_range([m.seq for m in messages])


def _condensed_sources(session: Session, plan: PassPlan) -> tuple[list[str], StoredRange]:
    """A condensed summary's large files and source range: its parents' unions."""
    ids = [e.summary.id for e in plan.entries if e.summary is not None]
    rows = session.execute(
        select(
            Summary.file_ids,
            Summary.source_message_count,
            Summary.source_first_seq,
            Summary.source_last_seq,
        ).where(Summary.id.in_(ids))
    ).all()
    file_ids = sorted({fid for row in rows for fid in row[0]})
    return file_ids, union_ranges([(r[1], r[2], r[3]) for r in rows])

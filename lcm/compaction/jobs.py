"""What workers run with compaction debt: one leased pass per job, chained.

Debt on the way in (recording it, waiting for it) is :mod:`lcm.compaction.service`.

A sweep is a chain of jobs (docs/design.md §7), one pass each. The first job (a
wake-up from the API or the reconciler) claims the debt row; every later job
claims it as the designated successor of the previous one (a fencing-token
compare-and-swap; both in :mod:`lcm.compaction.claims`). Each runs one pass
and works out from the committed state what comes next. The entrypoint (a
Celery task or the API's inline mode) enqueues what :class:`Step` says after
the commits; no transaction spans an LLM call (``transaction`` is its own).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from lcm.compaction.call_guard import guard_wait, lookback
from lcm.compaction.claims import LeaseClaims
from lcm.compaction.debt_repository import Claim, DebtRepository
from lcm.compaction.debt_statements import FAILED, REPAIR
from lcm.compaction.engine import CompactionEngine, PassOutcome
from lcm.compaction.pass_log import log_pass
from lcm.compaction.planning import PassPlan
from lcm.compaction.repair import SummaryRepair
from lcm.compaction.repository import CompactionRepository
from lcm.compaction.steps import Step, StepAction
from lcm.compaction.sweep import (
    ChainPosition,
    applied,
    chain_bound_reached,
    next_pass,
    plan_after_pass,
)
from lcm.context import ContextEntry, context_tokens
from lcm.db.engine import Transaction
from lcm.db.models import CompactionRun, utcnow
from lcm.errors import ContextChanged, StaleLease
from lcm.logs import add_log_fields
from lcm.settings import CompactionSettings, Settings

log = logging.getLogger(__name__)


class CompactionJobs:
    """Runs wake-ups and passes for one worker (``owner`` names it in leases)."""

    def __init__(
        self,
        transaction: Transaction,
        engine: CompactionEngine,
        settings: Settings,
        owner: str,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.transaction = transaction
        self.engine = engine
        self.settings = settings
        self.owner = owner
        self.clock = clock
        self.claims = LeaseClaims(transaction, settings, owner, clock, engine.reads)
        self.repairs = SummaryRepair(engine)

    def wake(self, conversation_id: int, kind: str | None = None) -> Step:
        """Claim pending (or abandoned) debt and run the sweep's first pass."""
        return self._first_pass(self.claims.claim(conversation_id, None), conversation_id, kind)

    def wake_fairly(self, conversation_id: int, kind: str | None = None) -> Step:
        """A queued wake-up: claim the due debt of the tenant that waited longest.

        Falls back to ``conversation_id`` (the conversation it was sent for)
        when no pending debt is due, e.g. to take over an expired lease.
        See ``lcm/compaction/fairness_repository.py`` for why this is fair and loses nothing.
        """
        return self._first_pass(self.claims.claim_fairly(conversation_id), conversation_id, kind)

    def _first_pass(
        self,
        read: tuple[Claim, CompactionSettings, list[ContextEntry]] | None,
        conversation_id: int,
        kind: str | None,
    ) -> Step:
        if read is None:
            return Step(
                StepAction.NOOP, conversation_id
            )  # someone holds the lease, or nothing is owed
        claim, settings, before = read
        if claim.attempts >= self.settings.max_attempts:
            return self._fail(claim, "gave up: the lease expired too many times")
        start = ChainPosition.start(before, self.clock().timestamp())
        step = self._run(claim, settings, before, kind, start)
        if claim.enqueued_at is None:
            return step
        lag = max(0.0, (self.clock() - claim.enqueued_at).total_seconds())
        return replace(step, queue_lag_seconds=lag)

    def run_pass(
        self,
        conversation_id: int,
        fencing_token: int,
        kind: str | None = None,
        position: ChainPosition | None = None,
    ) -> Step:
        """Run the pass the holder of ``fencing_token`` handed over, then name the next.

        ``position`` is the chain's round as the previous job left it (a job
        sent before rounds existed carries none: it continues round one).
        """
        read = self.claims.claim(conversation_id, fencing_token)
        if read is None:
            return Step(StepAction.NOOP, conversation_id)  # a duplicate delivery, or a lost lease
        claim, settings, before = read
        if position is None:
            position = ChainPosition.start(before, self.clock().timestamp())
        return self._run(claim, settings, before, kind, position)

    def _run(
        self,
        claim: Claim,
        settings: CompactionSettings,
        before: list[ContextEntry],
        kind: str | None,
        position: ChainPosition,
    ) -> Step:
        """One pass under ``claim``. A job of another ``kind`` hands the lease over instead."""
        add_log_fields(tenant_id=claim.tenant_id, conversation_id=claim.conversation_id)
        if claim.reason == REPAIR:
            repaired = self._repair(claim, settings, kind, position)
            if repaired is not None:
                return repaired
        budget = settings.capped_budget(claim.token_budget or self.settings.default_token_budget)
        plan = next_pass(before, settings, budget, target_tokens=claim.target_tokens)
        if plan is None or (kind is not None and plan.kind != kind):
            # Nothing left, or a condense pass reached by a leaf job (or the
            # reverse): the right job runs it, so Flower's labels stay true.
            return self._after(claim, plan, None, position)
        wait = self._rate_limited(claim, settings)
        if wait is not None:
            return self._pause(claim, wait)
        return self._pass(claim, settings, budget, before, plan, position)

    def _pass(
        self,
        claim: Claim,
        settings: CompactionSettings,
        budget: int,
        before: list[ContextEntry],
        plan: PassPlan,
        position: ChainPosition,
    ) -> Step:
        """Run ``plan`` and settle what comes next in its commit transaction."""
        conversation_id = claim.conversation_id
        # Decided inside the pass's commit transaction (``settle``): the
        # chain's next pass, or its end, whose release then commits with the
        # summary: one transaction fewer for the last pass of every sweep.
        settled: list[tuple[PassPlan | None, ChainPosition, bool]] = []

        def settle(session: Session, entry: ContextEntry) -> None:
            following, counted = self._following(
                claim, settings, budget, before, applied(before, plan, entry), position.counted()
            )
            released = following is None and DebtRepository(session).release(claim, self.clock())
            settled[:] = [(following, counted, released)]

        try:
            outcome = self.engine.run_pass(
                claim.tenant_id,
                conversation_id,
                plan,
                settings,
                fence=self._fence(claim),
                then=settle,
            )
        except StaleLease as exc:
            # Another holder took over, or the conversation was erased: the
            # summary is dropped unwritten, which is the fence doing its job.
            log.info("compaction pass for conversation %s dropped: %s", conversation_id, exc)
            return Step(StepAction.NOOP, conversation_id)
        except ContextChanged:
            # The range changed under the pass: replan from the committed state.
            after = self.engine.load(conversation_id)
            replanned = next_pass(after, settings, budget, target_tokens=claim.target_tokens)
            return self._after(claim, replanned, None, position)
        except Exception as exc:
            log.exception("compaction pass failed for conversation %s", conversation_id)
            return self._fail(claim, f"{type(exc).__name__}: {exc}", plan)
        log_pass(claim, plan, outcome, budget, context_tokens(before))
        if settled:
            following, counted, follow_up = settled[0]
            if following is None:
                return self._ended(claim, outcome, counted, follow_up)
            return self._after(claim, following, outcome, counted)
        after = self.engine.load(conversation_id)
        following, counted = self._following(
            claim, settings, budget, before, after, position.counted()
        )
        return self._after(claim, following, outcome, counted)

    def _following(
        self,
        claim: Claim,
        settings: CompactionSettings,
        budget: int,
        before: list[ContextEntry],
        after: list[ContextEntry],
        position: ChainPosition,
    ) -> tuple[PassPlan | None, ChainPosition]:
        """After a pass: the chain's next pass (None: its end, bounds included)."""
        now = self.clock().timestamp()
        following, position = plan_after_pass(
            context_tokens(before),
            after,
            settings,
            budget,
            position,
            target_tokens=claim.target_tokens,
            now=now,
        )
        bound = chain_bound_reached(position, settings, now)
        if bound is not None and following is None:
            log.warning(
                "conversation %s (tenant %s): sweep chain stopped by sweep_max_%s after %d "
                "passes in %.1f s; the next turn over the threshold resumes it",
                claim.conversation_id,
                claim.tenant_id,
                bound,
                position.passes,
                now - position.started_at if position.started_at else 0.0,
            )
        return following, position

    def _rate_limited(self, claim: Claim, settings: CompactionSettings) -> float | None:
        """Seconds to wait while the conversation's call guard is open (or backing off)."""
        limit = settings.summary_max_calls_per_window
        if limit is None:
            return None
        now = self.clock()
        with self.transaction() as session:
            calls = CompactionRepository(session).newest_runs_since(
                claim.conversation_id, now - lookback(settings), limit
            )
        return guard_wait(calls, settings, now)

    def _pause(self, claim: Claim, wait: float) -> Step:
        """Give the lease back and ask for a wake-up in ``wait`` seconds (no attempt spent).

        The debt stays pending with ``enqueued_at`` in the future, so neither
        the reconciler nor a fair wake-up claims it before then: the chain
        waits instead of spinning on a rate limit.
        """
        now = self.clock()
        log.warning(
            "conversation %s (tenant %s): summarization call rate limit reached; "
            "compaction backs off for %.0f s",
            claim.conversation_id,
            claim.tenant_id,
            wait,
        )
        with self.transaction() as session:
            paused = DebtRepository(session).defer(claim, now, now + timedelta(seconds=wait))
        if not paused:
            return Step(StepAction.NOOP, claim.conversation_id)  # the lease was lost meanwhile
        return Step(StepAction.PAUSED, claim.conversation_id, countdown=wait)

    def _repair(
        self,
        claim: Claim,
        settings: CompactionSettings,
        kind: str | None,
        position: ChainPosition,
    ) -> Step | None:
        """One repair under ``claim``; ``None`` once none is left (the chain sweeps on).

        A job of another kind hands the lease to a repair job, so Flower shows
        repairs as ``compaction.repair``.
        """
        target = self.repairs.next_target(claim.conversation_id, settings.timezone)
        if target is None or chain_bound_reached(position, settings, self.clock().timestamp()):
            return None
        if kind is not None and kind != REPAIR:
            return Step(
                StepAction.PASS,
                claim.conversation_id,
                REPAIR,
                claim.fencing_token,
                position=position,
            )
        try:
            outcome = self.repairs.repair(
                claim.tenant_id, claim.conversation_id, target, settings, self._fence(claim)
            )
        except StaleLease as exc:
            log.info("repair for conversation %s dropped: %s", claim.conversation_id, exc)
            return Step(StepAction.NOOP, claim.conversation_id)
        except ContextChanged:
            outcome = None  # repaired by someone else meanwhile: look again
        except Exception as exc:
            # The LLM still down (or the budget spent): retried with backoff.
            log.warning("repair for conversation %s failed: %s", claim.conversation_id, exc)
            return self._fail(claim, f"repair: {type(exc).__name__}: {exc}")
        return Step(
            StepAction.PASS,
            claim.conversation_id,
            REPAIR,
            claim.fencing_token,
            outcome=outcome,
            position=position.counted(),
        )

    # --- helpers ------------------------------------------------------------

    def _fence(self, claim: Claim) -> Callable[[Session], None]:
        def check(session: Session) -> None:
            DebtRepository(session).check_fence(claim, self.clock())

        return check

    def _after(
        self,
        claim: Claim,
        plan: PassPlan | None,
        outcome: PassOutcome | None,
        position: ChainPosition,
    ) -> Step:
        if plan is not None:
            return Step(
                StepAction.PASS,
                claim.conversation_id,
                plan.kind,
                claim.fencing_token,
                outcome=outcome,
                position=position,
            )
        with self.transaction() as session:
            follow_up = DebtRepository(session).release(claim, self.clock())
        return self._ended(claim, outcome, position, follow_up)

    def _ended(
        self,
        claim: Claim,
        outcome: PassOutcome | None,
        position: ChainPosition,
        follow_up: bool,
    ) -> Step:
        """The chain ended and its lease was released (``follow_up``: debt re-armed meanwhile)."""
        if position.round > 1:
            log.info(
                "conversation %s: sweep chain ended after %d rounds",
                claim.conversation_id,
                position.round,
            )
        return Step(StepAction.DONE, claim.conversation_id, follow_up=follow_up, outcome=outcome)

    def _fail(self, claim: Claim, error: str, plan: PassPlan | None = None) -> Step:
        now = self.clock()
        delay = min(
            2**claim.attempts * self.settings.retry_base_seconds, self.settings.retry_max_seconds
        )
        with self.transaction() as session:
            status = DebtRepository(session).fail(
                claim, error, now, self.settings.max_attempts, now + timedelta(seconds=delay)
            )
            if status is not None and plan is not None:
                CompactionRepository(session).record_run(
                    CompactionRun(
                        tenant_id=claim.tenant_id,
                        conversation_id=claim.conversation_id,
                        kind=plan.kind,
                        depth=plan.depth,
                        tokens_in=plan.source_tokens,
                        error=error[:2000],
                    )
                )
        if status == FAILED:
            return Step(StepAction.FAILED, claim.conversation_id)
        if status is None:
            return Step(StepAction.NOOP, claim.conversation_id)
        return Step(StepAction.RETRY, claim.conversation_id, countdown=delay)


__all__ = ["CompactionJobs", "Step"]

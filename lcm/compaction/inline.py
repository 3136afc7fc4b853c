"""A sweep's whole chain run in the calling thread, not on workers.

Inline mode (``compaction_mode: inline``), the doctor's repairs and
``lcm import --compact`` use it: the same jobs a worker runs
(:class:`~lcm.compaction.jobs.CompactionJobs`), one after the other, each
pass in its own transactions and under the same lease, so a worker holding
the conversation is never overlapped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lcm.compaction.engine import PassOutcome
from lcm.compaction.jobs import CompactionJobs
from lcm.compaction.service import record_debt
from lcm.compaction.steps import StepAction
from lcm.context import context_tokens


@dataclass(frozen=True, slots=True)
class SweepReport:
    """A chain run to its end in one thread (:func:`run_inline`)."""

    passes: tuple[PassOutcome, ...]
    tokens_before: int
    tokens_after: int
    ended: StepAction  # done | failed | retry (a pass failed; the debt retries later) | paused


def run_inline(
    jobs: CompactionJobs,
    conversation_id: int,
    on_pass: Callable[[PassOutcome], None] | None = None,
) -> SweepReport | None:
    """Run the whole chain in this thread; ``None`` if a worker holds the lease."""
    tokens_before = context_tokens(jobs.engine.load(conversation_id))
    step = jobs.wake(conversation_id)
    if step.action == StepAction.NOOP:
        return None
    outcomes: list[PassOutcome] = []
    while True:
        if step.outcome is not None:
            outcomes.append(step.outcome)
            if on_pass is not None:
                on_pass(step.outcome)
        if step.action != StepAction.PASS or step.fencing_token is None:
            break
        step = jobs.run_pass(conversation_id, step.fencing_token, position=step.position)
    tokens_after = context_tokens(jobs.engine.load(conversation_id))
    return SweepReport(tuple(outcomes), tokens_before, tokens_after, step.action)


def compact_now(
    jobs: CompactionJobs,
    tenant_id: str,
    conversation_id: int,
    token_budget: int,
    target_tokens: int | None = None,
    on_pass: Callable[[PassOutcome], None] | None = None,
) -> SweepReport | None:
    """Owe manual compaction and run its chain here (``lcm import --compact``).

    The debt row is the same one the API writes, so a worker that holds the
    lease is never overlapped: then this returns ``None`` and the worker's
    follow-up covers the request.
    """
    with jobs.transaction() as session:
        record_debt(session, tenant_id, conversation_id, "manual", token_budget, target_tokens)
    return run_inline(jobs, conversation_id, on_pass)


__all__ = ["SweepReport", "compact_now", "run_inline"]

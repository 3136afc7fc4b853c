"""Compaction tasks: thin wrappers over :mod:`lcm.compaction.jobs`.

Each task takes a conversation id (and a fencing token for chained passes),
reloads everything from the database and is safe to run twice: the claim is a
compare-and-swap on the debt row, so a duplicate delivery is a no-op.
"""

from __future__ import annotations

from typing import Any

from celery.signals import worker_ready

from lcm.compaction.reconcile import keep_fair_queue, overdue_debts
from lcm.compaction.steps import Step, StepAction
from lcm.compaction.sweep import ChainPosition
from lcm.completions import debt_key
from lcm.job_types import COMPACTION_RECONCILE, CONDENSE, LEAF, REPAIR, SURGERY
from workers import completions, metrics, runtime, sender
from workers.celery_app import app

# Pass jobs store no result (``ignore_result``): their return value ("done",
# "noop", ...) is for the worker's log. Nothing reads it back: the debt row is
# the truth, and a waiting compact request is woken by ``completions.announce``,
# not by the result backend. Not storing it spares a Redis write per pass,
# about 1 ms of worker CPU that a wave of passes otherwise queues for under
# the GIL. Acknowledgement is unchanged (``task_acks_late``).


def _follow(step: Step) -> str:
    """Enqueue what the step asks for (its transactions have committed) and record it."""
    if step.outcome is not None:
        metrics.PASSES.labels(step.outcome.kind, step.outcome.escalation).inc()
        if step.outcome.degraded is not None:
            metrics.DEGRADED_SUMMARIES.labels(step.outcome.degraded).inc()
        if step.outcome.degraded == "budget":
            metrics.LLM_BUDGET_EXHAUSTED.labels(step.outcome.tenant_id, "summary").inc()
        metrics.PASS_SECONDS.labels(step.outcome.kind).observe(step.outcome.duration_ms / 1000)
        metrics.count_llm_tokens(
            step.outcome.tenant_id, step.outcome.llm_input_tokens, step.outcome.llm_output_tokens
        )
    if step.queue_lag_seconds is not None:
        metrics.QUEUE_LAG.observe(step.queue_lag_seconds)
    if step.action == StepAction.PASS and step.kind and step.fencing_token is not None:
        position = step.position
        sender.next_pass(
            step.conversation_id,
            step.kind,
            step.fencing_token,
            chain=None if position is None else position.as_args(),
        )
    elif step.action == StepAction.RETRY:
        metrics.FAILURES.labels("false").inc()
        sender.wake(step.conversation_id, countdown=step.countdown)
    elif step.action == StepAction.PAUSED:
        # The per-conversation call rate limit: a delayed wake-up, not a spin.
        metrics.RATE_LIMIT_PAUSES.inc()
        sender.wake(step.conversation_id, countdown=step.countdown)
    elif step.action == StepAction.FAILED:
        metrics.FAILURES.labels("true").inc()
    if step.follow_up:
        sender.wake(step.conversation_id)
    if step.action in (StepAction.DONE, StepAction.FAILED):
        completions.announce(debt_key(step.conversation_id))  # a compact request may wait
    return step.action


@app.task(name=LEAF.name, ignore_result=True)
def leaf(
    conversation_id: int, fencing_token: int | None = None, chain: list[float] | None = None
) -> str:
    """One leaf pass (raw messages -> a depth-0 summary).

    Without a token this is a sweep's first job, a wake-up: it claims the debt
    row of the tenant that waited longest (``conversation_id`` if none is due).
    ``chain`` is the sweep chain's position (``ChainPosition.as_args``).
    """
    return _run(conversation_id, fencing_token, "leaf", chain)


@app.task(name=CONDENSE.name, ignore_result=True)
def condense(
    conversation_id: int, fencing_token: int | None = None, chain: list[float] | None = None
) -> str:
    """One condensed pass (summaries -> a deeper summary)."""
    return _run(conversation_id, fencing_token, "condensed", chain)


@app.task(name=REPAIR.name, ignore_result=True)
def repair(
    conversation_id: int, fencing_token: int | None = None, chain: list[float] | None = None
) -> str:
    """One doctor repair: a degraded summary re-summarized in place (``lcm doctor --apply``)."""
    return _run(conversation_id, fencing_token, "repair", chain)


@app.task(name=SURGERY.name, ignore_result=True)
def surgery(
    conversation_id: int, fencing_token: int | None = None, chain: list[float] | None = None
) -> str:
    """One pass of an operator's summary surgery (``lcm summary rewrite|dissolve``)."""
    return _run(conversation_id, fencing_token, "surgery", chain)


def _run(
    conversation_id: int, fencing_token: int | None, kind: str, chain: list[float] | None
) -> str:
    jobs = runtime.compaction_jobs()
    # The pass takes its turn at the process's Python work and gives it up
    # while the model answers (lcm/turns.py: why a wave of replies must not
    # interleave under the GIL).
    with runtime.services().turns.turn():
        if fencing_token is None:
            # A queued wake-up serves tenants round-robin, not the FIFO order of
            # the queue (lcm/compaction/fairness_repository.py).
            return _follow(jobs.wake_fairly(conversation_id, kind))
        position = None if not chain else ChainPosition.from_args(chain)
        return _follow(jobs.run_pass(conversation_id, fencing_token, kind, position))


@app.task(name=COMPACTION_RECONCILE.name)
def reconcile(grace_seconds: float | None = None) -> int:
    """Beat: re-wake debt whose wake-up was lost or whose lease expired.

    ``grace_seconds`` overrides how old a wake-up must be to count as lost.
    """
    transaction = runtime.database().transaction
    keep_fair_queue(transaction, runtime.settings().reconcile_batch)
    woken = overdue_debts(transaction, runtime.settings(), grace_seconds)
    for conversation_id in woken:
        sender.wake(conversation_id)
    metrics.RECONCILED.inc(len(woken))
    return len(woken)


@worker_ready.connect
def _warm_up(**_kwargs: Any) -> None:
    warm_up()


def warm_up() -> None:
    """Build the job runner (LLM SDK import, client, breaker) before the first task.

    Otherwise the first wave of tasks all wait on that one-time setup (about
    1.5 s for the SDK import alone, many seconds on a core the API keeps
    busy), which shows up as queue lag. The hot statements are compiled here
    too, for the same reason. A worker runs it when ready; ``lcm serve``'s
    in-process worker, which sends no ``worker_ready``, calls it at start.
    """
    runtime.compaction_jobs()
    runtime.database().compile_statements()

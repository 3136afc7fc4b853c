"""Compaction tasks: thin wrappers over :mod:`lcm.compaction.jobs`.

Each task takes a conversation id (and a fencing token for chained passes),
reloads everything from the database and is safe to run twice: the claim is a
compare-and-swap on the debt row, so a duplicate delivery is a no-op.
"""

from __future__ import annotations

from lcm.compaction.jobs import Step
from lcm.compaction.reconcile import overdue_debts
from workers import enqueue, metrics, runtime
from workers.celery_app import app


def _follow(step: Step) -> str:
    """Enqueue what the step asks for (its transactions have committed) and record it."""
    if step.outcome is not None:
        metrics.PASSES.labels(step.outcome.kind, step.outcome.escalation).inc()
        metrics.PASS_SECONDS.labels(step.outcome.kind).observe(step.outcome.duration_ms / 1000)
        metrics.LLM_TOKENS.labels(step.outcome.tenant_id, "input").inc(
            step.outcome.llm_input_tokens
        )
        metrics.LLM_TOKENS.labels(step.outcome.tenant_id, "output").inc(
            step.outcome.llm_output_tokens
        )
    if step.queue_lag_seconds is not None:
        metrics.QUEUE_LAG.observe(step.queue_lag_seconds)
    if step.action == "pass" and step.kind and step.fencing_token is not None:
        enqueue.next_pass(step.conversation_id, step.kind, step.fencing_token)
    elif step.action == "retry":
        metrics.FAILURES.labels("false").inc()
        enqueue.wake(step.conversation_id, countdown=step.countdown)
    elif step.action == "failed":
        metrics.FAILURES.labels("true").inc()
    if step.follow_up:
        enqueue.wake(step.conversation_id)
    return step.action


@app.task(name="compaction.wake")
def wake(conversation_id: int) -> str:
    """Claim the conversation's debt and start its sweep."""
    return _follow(runtime.compaction_jobs().wake(conversation_id))


@app.task(name="compaction.leaf")
def leaf(conversation_id: int, fencing_token: int) -> str:
    """One leaf pass (raw messages → a depth-0 summary)."""
    return _follow(runtime.compaction_jobs().run_pass(conversation_id, fencing_token))


@app.task(name="compaction.condense")
def condense(conversation_id: int, fencing_token: int) -> str:
    """One condensed pass (summaries → a deeper summary)."""
    return _follow(runtime.compaction_jobs().run_pass(conversation_id, fencing_token))


@app.task(name="compaction.reconcile")
def reconcile() -> int:
    """Beat: re-wake debt whose wake-up was lost or whose lease expired."""
    woken = overdue_debts(runtime.database().transaction, runtime.settings())
    for conversation_id in woken:
        enqueue.wake(conversation_id)
    metrics.RECONCILED.inc(len(woken))
    return len(woken)

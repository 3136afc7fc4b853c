"""Sending work to the queues: always after the transaction that made it committed.

A failed send is logged, never raised: the debt row is already committed, and
beat's reconciler wakes any pending debt whose wake-up did not arrive.
"""

from __future__ import annotations

import logging

from workers.celery_app import app

log = logging.getLogger(__name__)

PASS_TASKS = {"leaf": "compaction.leaf", "condensed": "compaction.condense"}


def wake(conversation_id: int, countdown: float = 0.0) -> bool:
    """Ask a worker to claim the conversation's debt; False if the broker refused.

    A sweep usually starts with a leaf pass, so the first job is a leaf job
    without a token; one that finds a condense pass first hands over to a
    condense job.
    """
    try:
        app.send_task(
            "compaction.leaf",
            args=[conversation_id],
            queue="compaction",
            countdown=countdown or None,
        )
        return True
    except Exception:
        log.warning(
            "wake-up for conversation %s not sent; the reconciler will retry",
            conversation_id,
            exc_info=True,
        )
        return False


def next_pass(conversation_id: int, kind: str, fencing_token: int) -> bool:
    """Hand the lease to the next pass job (token compare-and-swap on claim)."""
    try:
        app.send_task(PASS_TASKS[kind], args=[conversation_id, fencing_token], queue="compaction")
        return True
    except Exception:
        log.warning(
            "pass for conversation %s not sent; the lease will expire and the "
            "reconciler will resume it",
            conversation_id,
            exc_info=True,
        )
        return False

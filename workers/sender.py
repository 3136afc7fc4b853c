"""The one place that sends work to the queues.

Every send happens after the transaction that made the work committed: the
outbox jobs of a unit of work (``lcm/outbox.py``) through :class:`CelerySender`,
the chained passes and retries a compaction job hands on (``next_pass``,
``wake`` with a countdown) after its own pass committed, and an expand-query
whose grant is committed (:func:`submit`). Each goes to its job type's task
and queue (``lcm/job_types.py``). A failed send is logged, never raised
(except by :func:`submit`, whose caller waits for the answer): the database
row is the truth, and beat's reconcilers (in-process in embedded mode)
resend a wake-up for pending debt and a summary job for a large file that
still has none.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from celery.result import AsyncResult

from lcm.job_types import INDEX_SEARCH_BACKLOG, LEAF, PASS_JOBS, SUMMARIZE_FILE, JobType
from lcm.outbox import Job
from workers.celery_app import app

log = logging.getLogger(__name__)


class CelerySender:
    """Sends outbox jobs through the Celery app (Redis, or in-process when embedded)."""

    def send(self, jobs: Sequence[Job]) -> None:
        for job in jobs:
            _send(job.job_type, job.args(), repr(job))


def submit(job_type: JobType, args: list[object], countdown: float | None = None) -> AsyncResult:
    """Send one job and return its handle; raises when the broker refuses it."""
    return app.send_task(job_type.name, args=args, queue=job_type.queue, countdown=countdown)


def index_search_backlog() -> bool:
    """Ask a worker to index SQLite's search backlog (beat resends it if this is lost)."""
    return _send(INDEX_SEARCH_BACKLOG, [], "search backlog indexing")


def wake(conversation_id: int, countdown: float = 0.0) -> bool:
    """Ask a worker to claim the conversation's debt; False if the broker refused.

    A sweep usually starts with a leaf pass, so the first job is a leaf job
    without a token; one that finds a condense pass first hands over to a
    condense job.
    """
    return _send(
        LEAF,
        [conversation_id],
        f"wake-up for conversation {conversation_id}",
        countdown=countdown or None,
    )


def next_pass(
    conversation_id: int, kind: str, fencing_token: int, chain: list[float] | None = None
) -> bool:
    """Hand the lease to the next pass job (token compare-and-swap on claim).

    ``chain`` (``ChainPosition.as_args``: round, tokens the round began with,
    passes, start time) travels with the lease so the next job knows how far
    the sweep chain has gone.
    """
    return _send(
        PASS_JOBS[kind],
        [conversation_id, fencing_token, list(chain) if chain else None],
        f"pass for conversation {conversation_id} (the lease will expire and be resumed)",
    )


def summarize_files(file_ids: Iterable[str]) -> int:
    """Send one file-summary job per file id; return how many were sent."""
    return sum(
        _send(SUMMARIZE_FILE, [file_id], f"{SUMMARIZE_FILE.name} for {file_id}")
        for file_id in file_ids
    )


def _send(job_type: JobType, args: list[object], what: str, countdown: float | None = None) -> bool:
    try:
        submit(job_type, args, countdown)
        return True
    except Exception:
        log.warning("%s not sent; a reconciler will resend it", what, exc_info=True)
        return False

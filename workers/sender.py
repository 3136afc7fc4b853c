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
import threading
import time
from collections.abc import Callable, Iterable, Sequence

from celery.result import AsyncResult

from lcm.job_types import INDEX_SEARCH_BACKLOG, LEAF, PASS_JOBS, SUMMARIZE_FILE, JobType
from lcm.outbox import IndexSearchBacklog, Job
from workers.celery_app import app

log = logging.getLogger(__name__)


# How long after the commit asking for it a search-backlog drain starts. Each
# drain is a write transaction, a job and FTS5 segments of its own: sent at
# once, a drain indexed the ~10 messages committed while the last one ran,
# and under a gateway's load on ``lcm serve`` indexing was about a quarter
# of the process's CPU. Started a second later, one drain takes a second's
# commits: 17% less CPU a turn for two unsaturated ``lcm serve`` side by side
# (bench gateway_ab --embedded). Grep reads the messages not indexed yet from
# the backlog, so no result waits for the index.
DRAIN_DELAY_SECONDS = 1.0


class DrainRequests:
    """At most one search-backlog drain queued or running per process.

    On SQLite every unit of work that inserts messages asks for a drain
    (``lcm.retrieval.search_backlog``), one per request of a gateway turn.
    Sent as asked, hundreds of drains ran at once under load, each taking
    the write lock in turn (mostly to find the backlog empty) on a pool
    thread of the compaction queue, and a compaction wake-up waited behind
    them (``lcm serve`` made no compaction pass for 20 s and more).

    Here a request while a drain is queued sends nothing: that drain takes
    every row committed before it starts. A request while one runs sends
    nothing either but marks it: the running drain may have passed the
    rows already, so it sends the next one when it ends (:meth:`finished`).

    Every drain is sent to start :data:`DRAIN_DELAY_SECONDS` after it is
    asked for, so it indexes that second's commits in one go.

    A drain this process sent may run in another process (an API process
    beside a worker on the same SQLite file) and never report here: a drain
    sent or started more than ``resend_seconds`` ago no longer holds the
    next one back. A lost drain costs only index lag (grep reads unindexed
    messages from the backlog) and beat resends one.
    """

    def __init__(
        self,
        resend_seconds: float = DRAIN_DELAY_SECONDS + 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.resend_seconds = resend_seconds
        self.clock = clock
        # Guards the fields below: request threads ask while a worker thread
        # starts and finishes the drain; each reads and sets them together.
        self._lock = threading.Lock()
        self._since: float | None = None  # when the drain was sent or started; None: none
        self._running = False
        self._again = False

    def should_send(self) -> bool:
        """True (and a drain counted as queued from now) unless one is queued or running."""
        now = self.clock()
        with self._lock:
            if self._since is not None and now - self._since < self.resend_seconds:
                if self._running:
                    self._again = True
                return False
            self._since, self._running, self._again = now, False, False
            return True

    def started(self) -> None:
        """A drain began (in this process)."""
        with self._lock:
            self._since, self._running, self._again = self.clock(), True, False

    def finished(self) -> bool:
        """A drain ended; True if another must follow (rows were committed as it ran).

        On True the next drain counts as queued from now: the caller sends it.
        """
        with self._lock:
            if self._again:
                self._since, self._running, self._again = self.clock(), False, False
                return True
            self._since, self._running = None, False
            return False

    def forget(self) -> None:
        """No drain queued nor running (one the broker refused, or one that failed)."""
        with self._lock:
            self._since, self._running, self._again = None, False, False


DRAINS = DrainRequests()


class CelerySender:
    """Sends outbox jobs through the Celery app (Redis, or in-process when embedded)."""

    def __init__(self, drains: DrainRequests = DRAINS) -> None:
        self.drains = drains

    def send(self, jobs: Sequence[Job]) -> None:
        for job in jobs:
            if isinstance(job, IndexSearchBacklog):
                if self.drains.should_send() and not index_search_backlog(DRAIN_DELAY_SECONDS):
                    self.drains.forget()
                continue
            _send(job.job_type, job.args(), repr(job))


def submit(job_type: JobType, args: list[object], countdown: float | None = None) -> AsyncResult:
    """Send one job and return its handle; raises when the broker refuses it."""
    return app.send_task(job_type.name, args=args, queue=job_type.queue, countdown=countdown)


def index_search_backlog(countdown: float = 0.0) -> bool:
    """Ask a worker to index SQLite's search backlog, ``countdown`` seconds from now.

    False if the broker refused (beat resends one).
    """
    return _send(INDEX_SEARCH_BACKLOG, [], "search backlog indexing", countdown=countdown or None)


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

"""Work asked for inside a unit of work, sent to the workers only after it commits.

Domain code and routes never send jobs themselves: they add one to the
session's outbox with :func:`request_job`. ``Database`` hands a session's
outbox to its :class:`JobSender` right after that session commits and drops it
on rollback, so a worker never looks for rows that are not committed yet, and
work asked for by a transaction that failed is never sent. Jobs carry ids
only: the worker reloads what it needs. Each kind names its
:class:`~lcm.job_types.JobType` (the task and queue it goes to) and the
task's arguments.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol

from sqlalchemy.orm import Session

from lcm.job_types import INDEX_SEARCH_BACKLOG, LEAF, SUMMARIZE_FILE, JobType

_KEY = "lcm.outbox"


@dataclass(frozen=True, slots=True)
class WakeCompaction:
    """Claim the conversation's compaction debt and run its first pass."""

    conversation_id: int

    # A leaf job without a token is the wake-up (workers/tasks/compaction.py).
    job_type: ClassVar[JobType] = LEAF

    def args(self) -> list[object]:
        return [self.conversation_id]


@dataclass(frozen=True, slots=True)
class SummarizeFile:
    """Write a large file's exploration summary."""

    file_id: str

    job_type: ClassVar[JobType] = SUMMARIZE_FILE

    def args(self) -> list[object]:
        return [self.file_id]


@dataclass(frozen=True, slots=True)
class IndexSearchBacklog:
    """Index the messages SQLite has committed but not yet indexed for search.

    No ids: the job drains the whole backlog (``lcm.retrieval.search_backlog``),
    so any number of requests for it are one job's worth of work.
    """

    job_type: ClassVar[JobType] = INDEX_SEARCH_BACKLOG

    def args(self) -> list[object]:
        return []


Job = WakeCompaction | SummarizeFile | IndexSearchBacklog


class JobSender(Protocol):
    def send(self, jobs: Sequence[Job]) -> None:
        """Send ``jobs``; never raises (the database row is the truth, reconcilers resend)."""


def request_job(session: Session, job: Job) -> None:
    """Send ``job`` once the session's transaction commits (a duplicate request is one job)."""
    pending: list[Job] = session.info.setdefault(_KEY, [])
    if job not in pending:
        pending.append(job)


def take_jobs(session: Session) -> list[Job]:
    """The jobs the session asked for, removing them from its outbox."""
    jobs: list[Job] = session.info.pop(_KEY, [])
    return jobs


def drop_jobs(session: Session) -> None:
    session.info.pop(_KEY, None)

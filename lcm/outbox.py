"""Work asked for inside a unit of work, sent to the workers only after it commits.

Domain code and routes never send jobs themselves: they add one to the
session's outbox with :func:`request_job`. ``Database`` hands a session's
outbox to its :class:`JobSender` right after that session commits and drops it
on rollback, so a worker never looks for rows that are not committed yet, and
work asked for by a transaction that failed is never sent. Jobs carry ids
only: the worker reloads what it needs. The kinds of job the domain may
ask for are declared with their task and queue in ``lcm/job_types.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from sqlalchemy.orm import Session

from lcm.job_types import (
    EmbedConversation,
    IndexSearchBacklog,
    Job,
    SummarizeFile,
    WakeCompaction,
)

__all__ = [
    "EmbedConversation",
    "IndexSearchBacklog",
    "Job",
    "JobSender",
    "SummarizeFile",
    "WakeCompaction",
    "drop_jobs",
    "request_job",
    "take_jobs",
]

_KEY = "lcm.outbox"


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

"""What an entry point needs from the worker side, as a port its composition root fills.

The API never imports ``workers/``: the process that builds the app (``lcm
serve``, ``lcm api``, a test) hands ``create_app`` a :class:`WorkerLink`,
implemented over Celery by ``workers/link.py``. Through it the API sends the
jobs its units of work asked for, pings the broker, waits for work another
process finishes, runs an expand-query on a worker and counts the metrics the
workers own.
"""

from __future__ import annotations

from typing import Protocol

from lcm.completions import Completions
from lcm.outbox import JobSender


class WorkerLink(Protocol):
    """The worker side as the API sees it."""

    @property
    def recheck_seconds(self) -> float:
        """How often a waiter re-reads the truth when no wake-up came."""

    def sender(self) -> JobSender:
        """The sender that publishes a committed unit of work's jobs."""

    def broker_reachable(self) -> bool:
        """True when the broker answers (``/health``)."""

    def completions(self, broker_url: str) -> Completions:
        """This process's wake-ups, fed by workers elsewhere when the broker is shared."""

    def answer_expand_query(self, grant_id: str, timeout: float) -> None:
        """Run the expand-query stored on the (committed) grant on a worker and wait.

        The answer is on the grant then. Raises ``DependencyUnavailable`` when
        the broker refuses the job or no answer comes within ``timeout`` s.
        """

    def count_llm_budget_exhausted(self, tenant_id: str, purpose: str) -> None:
        """Count work refused because the tenant's daily LLM token budget is spent."""


__all__ = ["WorkerLink"]

"""The worker side as the API reaches it (:class:`lcm.worker_link.WorkerLink`), over Celery."""

from __future__ import annotations

from lcm.completions import Completions
from lcm.outbox import JobSender
from workers import completions, metrics
from workers.celery_app import broker_reachable
from workers.sender import CelerySender
from workers.tasks.expansion import submit_and_wait


class CeleryLink:
    """Jobs, wake-ups and metrics through this process's Celery app (Redis or in-memory)."""

    recheck_seconds = completions.RECHECK_SECONDS

    def sender(self) -> JobSender:
        return CelerySender()

    def broker_reachable(self) -> bool:
        return broker_reachable()

    def completions(self, broker_url: str) -> Completions:
        return completions.hub(broker_url)

    def answer_expand_query(self, grant_id: str, timeout: float) -> None:
        submit_and_wait(grant_id, timeout)

    def count_llm_budget_exhausted(self, tenant_id: str, purpose: str) -> None:
        metrics.LLM_BUDGET_EXHAUSTED.labels(tenant_id, purpose).inc()


__all__ = ["CeleryLink"]

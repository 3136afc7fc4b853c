"""Expansion tasks: the expand-query loop and the grant sweep (beat).

``expansion.query`` takes the grant id only: the request it answers is stored
on the grant and the answer goes back there (``lcm/retrieval/expansion.py``),
so no task message, event, result or log line carries the user's prompt or a
tenant's text. The grant is revoked when the loop ends. A redelivered message
runs the loop again under what is left of the same grant (or finds it
revoked), so a duplicate can never read more than the grant allows.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from celery.exceptions import TimeoutError as CeleryTimeout
from celery.result import AsyncResult

from lcm.completions import Completions, task_key
from lcm.db.models import utcnow
from lcm.errors import DependencyUnavailable, LcmError
from lcm.job_types import EXPAND_QUERY, SWEEP_GRANTS
from lcm.retrieval.expansion import answer_granted_query
from lcm.retrieval.grants import sweep_grants
from workers import completions, metrics, runtime, sender
from workers.celery_app import app


@app.task(name=EXPAND_QUERY.name)
def query(grant_id: str) -> dict[str, Any]:
    """Answer the expand-query stored on the grant; the answer is stored there too.

    Returns ``{"answered": grant_id}``, or ``{"error": {"code", "message"}}``.
    """
    services = runtime.services()
    try:
        tenant_id, answer = answer_granted_query(
            services.database.transaction, grant_id, services.settings, services.llms
        )
    except LcmError as exc:  # the grant ended, the model failed: the API's 503
        return {"error": {"code": exc.code, "message": exc.message}}
    metrics.count_llm_usage(tenant_id, answer.usage)
    return {"answered": grant_id}


@app.task(name=SWEEP_GRANTS.name)
def sweep() -> dict[str, int]:
    """Revoke expired grants; delete those ended past the retention, and expired leases."""
    settings = runtime.settings()
    retention = timedelta(hours=settings.expansion_grant_retention_hours)
    with runtime.database().transaction() as session:
        swept = sweep_grants(session, utcnow(), retention)
    return {"revoked": swept.revoked, "deleted": swept.deleted, "leases": swept.leases}


def submit_and_wait(grant_id: str, timeout: float) -> None:
    """Enqueue an expand-query (its grant is committed) and wait until it is answered.

    The answer is on the grant then (``lcm.retrieval.expansion.take_answer``).

    Raises :class:`DependencyUnavailable` when the broker refuses the job or
    the answer does not come within ``timeout`` seconds; the caller then
    revokes the grant so a late loop stops reading.
    """
    try:
        pending = sender.submit(EXPAND_QUERY, [grant_id])
    except Exception as exc:
        raise DependencyUnavailable(
            "the job queue is unavailable", code="broker_unavailable"
        ) from exc
    try:
        hub = completions.hub(runtime.settings().broker_url)
        outcome: dict[str, Any] = wait_for_result(pending, timeout, hub)
    except CeleryTimeout as exc:
        raise DependencyUnavailable(
            f"expand-query did not finish within {timeout:g} s", code="expansion_timeout"
        ) from exc
    finally:
        pending.forget()
    error = outcome.get("error")
    if error:
        # The loop could not finish: its grant ended early or the model failed.
        raise DependencyUnavailable(error["message"], code=error["code"])


def wait_for_result(
    pending: AsyncResult,
    timeout: float,
    hub: Completions,
    recheck: float = completions.RECHECK_SECONDS,
) -> dict[str, Any]:
    """The job's result, woken by its completion; ``CeleryTimeout`` after ``timeout`` s.

    The worker announces the job once Celery stored its result (in this
    process when embedded, over Redis otherwise); the result backend is the
    truth, re-read when woken and every ``recheck`` seconds in case a
    wake-up was lost. The deadline is the caller's and is kept here.
    """
    deadline = time.monotonic() + timeout
    with hub.watch(task_key(pending.id)) as woken:
        while True:
            woken.clear()  # before the read: a wake-up after it is not lost
            left = deadline - time.monotonic()
            if left <= 0:
                raise CeleryTimeout()
            if pending.ready():
                result: dict[str, Any] = pending.get(timeout=left, propagate=True)
                return result
            woken.wait(min(recheck, left))

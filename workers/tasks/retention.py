"""Retention: beat erases conversations idle longer than their tenant's ``retention_days``."""

from __future__ import annotations

from lcm.db.models import utcnow
from lcm.erasure.retention import sweep_retention
from lcm.job_types import RETENTION_SWEEP
from workers import runtime
from workers.celery_app import app


@app.task(name=RETENTION_SWEEP.name)
def sweep() -> int:
    """Erase a batch of idle conversations per tenant; return how many went.

    Safe to run twice or concurrently: each erase re-checks idleness under
    the conversation's row lock, and an erased conversation is skipped.
    """
    services = runtime.services()
    database = services.database
    outcome = sweep_retention(
        database.transaction, database.read_session, services.storage, services.settings, utcnow()
    )
    return len(outcome.erased)

"""Secret scan tasks: thin wrappers over :mod:`lcm.secrets.scans`."""

from __future__ import annotations

import uuid

from lcm.job_types import SECRETS_SCAN, SECRETS_SCAN_RECONCILE
from lcm.secrets import due_scans, run_scan_job
from workers import runtime
from workers.celery_app import app


@app.task(name=SECRETS_SCAN.name, ignore_result=True)
def scan(scan_id: int) -> str:
    """One slice of the scan; safe to run twice (a second finds the lease held)."""
    owner = f"scan-{uuid.uuid4().hex[:16]}"
    step = run_scan_job(runtime.database().transaction, scan_id, owner, runtime.settings())
    return step or "busy"


@app.task(name=SECRETS_SCAN_RECONCILE.name, ignore_result=True)
def reconcile() -> int:
    """Send again the scans whose wake-up was lost or whose worker died."""
    with runtime.database().transaction() as session:
        return len(due_scans(session))

"""Large-file tasks: the exploration summary of one stored file per job.

Takes a file id, reloads everything, and is safe to run twice: the summary is
written only where none exists, so a duplicate delivery changes nothing.
"""

from __future__ import annotations

from datetime import timedelta

from lcm.db.models import utcnow
from lcm.files.repository import LargeFileRepository
from lcm.files.service import summarize_file
from lcm.job_types import FILES_RECONCILE, SUMMARIZE_FILE
from workers import runtime
from workers.celery_app import app
from workers.sender import summarize_files


@app.task(name=SUMMARIZE_FILE.name)
def summarize(file_id: str) -> str:
    """Write the file's exploration summary; "skipped" when it exists or the file is gone."""
    services = runtime.services()
    outcome = summarize_file(
        services.database.transaction,
        services.storage,
        services.summarizer,
        file_id,
        services.settings,
    )
    return "skipped" if outcome is None else f"{outcome.kind}:{outcome.model}"


@app.task(name=FILES_RECONCILE.name)
def reconcile(grace_seconds: float = 300.0, limit: int = 500) -> int:
    """Beat: re-send summaries of files that still have none (a lost or failed job)."""
    cutoff = utcnow() - timedelta(seconds=grace_seconds)
    with runtime.database().read_session() as session:
        missing = LargeFileRepository(session).missing_summaries(cutoff, limit)
    return summarize_files(missing)

"""Sending ``files.summarize`` jobs: only after the ingest that stored the files committed.

A failed send is logged, never raised: the ``large_files`` row is committed
either way, and a row without an exploration summary can be found again
(``LargeFileRepository.missing_summaries``) and re-sent by a reconciler.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from workers.celery_app import app

log = logging.getLogger(__name__)


def enqueue_file_summaries(file_ids: Iterable[str]) -> int:
    """Send one ``files.summarize`` job per file id; return how many were sent."""
    sent = 0
    for file_id in file_ids:
        try:
            app.send_task("files.summarize", args=[file_id], queue="files")
            sent += 1
        except Exception:
            log.warning(
                "files.summarize for %s not sent; it stays without an exploration summary "
                "until it is re-sent",
                file_id,
                exc_info=True,
            )
    return sent

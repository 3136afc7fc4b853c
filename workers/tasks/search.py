"""Search tasks: SQLite's search backlog indexed after the ingest that wrote it committed."""

from __future__ import annotations

from lcm.job_types import INDEX_SEARCH_BACKLOG
from lcm.retrieval.search_backlog import index_search_backlog
from workers import runtime
from workers.celery_app import app
from workers.sender import DRAINS


@app.task(name=INDEX_SEARCH_BACKLOG.name)
def index_backlog() -> int:
    """Index every message still in the backlog; how many were indexed.

    Safe to run twice or concurrently: each chunk takes the backlog rows it
    indexes inside one write transaction, so a second run finds them gone.
    """
    # One drain queued or running per process; a commit made while it runs
    # asks it to go round once more (workers/sender.py: DrainRequests).
    DRAINS.started()
    indexed = 0
    try:
        indexed += index_search_backlog(runtime.database().transaction)
        while DRAINS.finished():
            indexed += index_search_backlog(runtime.database().transaction)
    except BaseException:
        DRAINS.forget()  # the next commit sends a drain again
        raise
    return indexed

"""Search tasks: SQLite's search backlog indexed after the ingest that wrote it committed."""

from __future__ import annotations

from collections.abc import Callable

from lcm.job_types import INDEX_SEARCH_BACKLOG
from lcm.retrieval.search_backlog import index_search_backlog
from workers import runtime, sender
from workers.celery_app import app
from workers.sender import DRAIN_DELAY_SECONDS, DRAINS, DrainRequests


@app.task(name=INDEX_SEARCH_BACKLOG.name)
def index_backlog() -> int:
    """Index every message still in the backlog; how many were indexed.

    Safe to run twice or concurrently: each chunk takes the backlog rows it
    indexes inside one write transaction, so a second run finds them gone.
    """
    return drain(lambda: index_search_backlog(runtime.database().transaction))


def drain(index: Callable[[], int], drains: DrainRequests = DRAINS) -> int:
    """``index()`` as the process's one running drain; how many it indexed.

    A commit made while it ran asks for one more drain, sent like the first,
    after the delay (workers/sender.py: ``DrainRequests``).
    """
    drains.started()
    try:
        indexed = index()
    except BaseException:
        drains.forget()  # the next commit sends a drain again
        raise
    if drains.finished() and not sender.index_search_backlog(DRAIN_DELAY_SECONDS):
        drains.forget()  # refused (logged): the next commit, or beat, sends one
    return indexed

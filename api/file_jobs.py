"""How the API sends ``files.summarize`` jobs (always after the commit that stored the files)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Annotated

from fastapi import Depends, Request

FileJobs = Callable[[Iterable[str]], object]


def get_file_jobs(request: Request) -> FileJobs:
    """``app.state.file_jobs`` when set (tests record instead of sending), else Celery."""
    jobs: FileJobs | None = getattr(request.app.state, "file_jobs", None)
    if jobs is not None:
        return jobs
    from workers.file_jobs import enqueue_file_summaries

    return enqueue_file_summaries


FileJobsDep = Annotated[FileJobs, Depends(get_file_jobs)]

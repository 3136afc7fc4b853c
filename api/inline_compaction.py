"""Inline compaction (``compaction_mode: inline``): the request runs the sweep itself.

The runner comes from the process's services (made on first use: most
deployments never need it) and holds the same lease as a worker would, so it
never overlaps one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Literal

from fastapi import Depends, Request

from lcm.compaction.inline import run_inline
from lcm.compaction.jobs import CompactionJobs
from lcm.services import Services


async def get_inline_jobs(request: Request) -> Callable[[], CompactionJobs]:
    # async: it only looks the services up, and FastAPI would run a plain
    # ``def`` dependency in its thread pool (one more hop on every turn).
    services: Services = request.app.state.services
    return lambda: services.compaction_jobs("api")


InlineJobsDep = Annotated[Callable[[], CompactionJobs], Depends(get_inline_jobs)]


def compaction_outcome(
    over_threshold: bool, mode: str, conversation_id: int, inline_jobs: Callable[[], CompactionJobs]
) -> Literal["none", "scheduled", "ran"]:
    """``none`` / ``scheduled`` / ``ran`` for a committed turn; inline mode runs the sweep here.

    Call it only after the turn's unit of work committed: the sweep reads
    the turn's messages and debt from the database.
    """
    if not over_threshold:
        return "none"
    if mode == "inline" and run_inline(inline_jobs(), conversation_id):
        return "ran"
    return "scheduled"  # deferred: the wake-up left with the commit; or a worker holds the lease

"""Inline compaction (``compaction_mode: inline``): the request runs the sweep itself.

The runner comes from the process's services (made on first use: most
deployments never need it) and holds the same lease as a worker would, so it
never overlaps one. What a turn's sweep ends as is
:func:`lcm.lifecycle.gateway.sweep_outcome`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, Request

from lcm.compaction.jobs import CompactionJobs
from lcm.services import Services


async def get_inline_jobs(request: Request) -> Callable[[], CompactionJobs]:
    # async: it only looks the services up, and FastAPI would run a plain
    # ``def`` dependency in its thread pool (one more hop on every turn).
    services: Services = request.app.state.services
    return lambda: services.compaction_jobs("api")


InlineJobsDep = Annotated[Callable[[], CompactionJobs], Depends(get_inline_jobs)]

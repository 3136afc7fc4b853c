"""How the API hands work to the workers (and, in inline mode, does it itself)."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from typing import Protocol

from fastapi import Request

from lcm.compaction.engine import CompactionEngine
from lcm.compaction.jobs import CompactionJobs
from lcm.db.engine import Database
from lcm.settings import Settings
from lcm.summarize.summarizer import Summarizer


class Enqueuer(Protocol):
    def wake(self, conversation_id: int, countdown: float = 0.0) -> bool: ...


class CeleryEnqueuer:
    """Sends wake-ups through the Celery app (Redis, or in-process when embedded)."""

    def wake(self, conversation_id: int, countdown: float = 0.0) -> bool:
        from workers import enqueue

        return enqueue.wake(conversation_id, countdown)


def build_inline_jobs(database: Database, settings: Settings) -> CompactionJobs:
    summarizer = Summarizer.from_settings(settings)
    return CompactionJobs(
        database.transaction,
        CompactionEngine(database.transaction, summarizer),
        settings,
        owner=f"api:{socket.gethostname()}:{os.getpid()}",
    )


def get_enqueuer(request: Request) -> Enqueuer:
    enqueuer: Enqueuer = request.app.state.enqueuer
    return enqueuer


def get_inline_jobs(request: Request) -> Callable[[], CompactionJobs]:
    """The app's inline job runner, built on first use (most deployments never need it)."""
    state = request.app.state

    def jobs() -> CompactionJobs:
        if state.inline_jobs is None:
            state.inline_jobs = build_inline_jobs(state.database, state.settings)
        built: CompactionJobs = state.inline_jobs
        return built

    return jobs

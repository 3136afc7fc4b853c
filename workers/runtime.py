"""Per-process state of the workers: the settings and one database engine."""

from __future__ import annotations

import os
import socket
import threading

from lcm.compaction.engine import CompactionEngine
from lcm.compaction.jobs import CompactionJobs
from lcm.db.engine import Database
from lcm.settings import Settings
from lcm.summarize.summarizer import Summarizer

_lock = threading.Lock()
_settings: Settings | None = None
_database: Database | None = None
_jobs: CompactionJobs | None = None


def use_settings(settings: Settings) -> None:
    global _settings, _database, _jobs
    with _lock:
        if _database is not None and _settings is not settings:
            _database.dispose()
            _database = None
        _settings = settings
        _jobs = None


def settings() -> Settings:
    if _settings is None:
        raise RuntimeError("workers.celery_app.configure() has not run")
    return _settings


def database() -> Database:
    """The process's database; created on first use (after any fork)."""
    # Pool threads start tasks concurrently; one engine per process, not per thread.
    with _lock:
        return _database_unlocked()


def compaction_jobs() -> CompactionJobs:
    """The process's job runner: one summarizer (and LLM circuit breaker) per process."""
    global _jobs
    with _lock:
        if _jobs is None:
            current = settings()
            summarizer = Summarizer.from_settings(current)
            _jobs = CompactionJobs(
                _database_unlocked().transaction,
                CompactionEngine(_database_unlocked().transaction, summarizer),
                current,
                owner=f"{socket.gethostname()}:{os.getpid()}",
            )
        return _jobs


def _database_unlocked() -> Database:
    global _database
    if _database is None:
        from workers.sender import CelerySender  # imported late: it imports the Celery app

        _database = Database(settings(), sender=CelerySender())
    return _database


def use_database(database: Database) -> None:
    """Share an existing engine (embedded mode: the API's own)."""
    global _database, _jobs
    with _lock:
        _database = database
        _jobs = None

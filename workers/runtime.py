"""Per-process state of the workers: the settings and one database engine."""

from __future__ import annotations

import threading

from lcm.db.engine import Database
from lcm.settings import Settings

_lock = threading.Lock()
_settings: Settings | None = None
_database: Database | None = None


def use_settings(settings: Settings) -> None:
    global _settings, _database
    with _lock:
        if _database is not None and _settings is not settings:
            _database.dispose()
            _database = None
        _settings = settings


def settings() -> Settings:
    if _settings is None:
        raise RuntimeError("workers.celery_app.configure() has not run")
    return _settings


def database() -> Database:
    """The process's database; created on first use (after any fork)."""
    global _database
    # Pool threads start tasks concurrently; one engine per process, not per thread.
    with _lock:
        if _database is None:
            _database = Database(settings())
        return _database


def use_database(database: Database) -> None:
    """Share an existing engine (embedded mode: the API's own)."""
    global _database
    with _lock:
        _database = database

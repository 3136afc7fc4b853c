"""What the tasks of this process run with: its settings and its one :class:`Services`.

:func:`workers.bootstrap.bootstrap` installs them (nothing does at import).
A worker process builds its services on first use, after Celery forked it
(an engine or an SDK client must not cross a fork), with the job sender the
bootstrap handed in. Embedded mode hands the API's own services in instead
(:func:`use_services`), so one process has one database engine, one LLM
client and one set of breakers.
"""

from __future__ import annotations

import threading

from celery.signals import worker_ready

from lcm.compaction.jobs import CompactionJobs
from lcm.db.engine import Database
from lcm.heap import freeze_startup_heap
from lcm.outbox import JobSender
from lcm.services import Services
from lcm.settings import Settings
from lcm.summarize.breaker import BreakerState
from lcm.turns import TurnStats

# Pool threads start tasks concurrently: they must build one Services, not one each.
_lock = threading.Lock()
_settings: Settings | None = None
_services: Services | None = None
_sender: JobSender | None = None


@worker_ready.connect
def _settle_heap(**_: object) -> None:
    # The worker has started: its modules and tasks live as long as the
    # process, and the collector need not walk them again (lcm/heap.py).
    freeze_startup_heap()


def use_settings(settings: Settings, sender: JobSender) -> None:
    """Configure the process (``workers.bootstrap``); services are built later,
    sending their jobs with ``sender``."""
    global _settings, _services, _sender
    with _lock:
        if _services is not None and _services.settings is not settings:
            _services.close()
            _services = None
        _settings, _sender = settings, sender


def use_services(services: Services) -> None:
    """Share an existing process's services (embedded mode: the API's own)."""
    global _settings, _services
    with _lock:
        _settings, _services = services.settings, services


def configured() -> bool:
    """Whether this process has been bootstrapped (``workers.bootstrap``)."""
    return _settings is not None


def settings() -> Settings:
    if _settings is None:
        raise RuntimeError("workers.bootstrap.bootstrap() has not run")
    return _settings


def services() -> Services:
    """The process's services; built on first use (after any fork)."""
    global _services
    with _lock:
        if _services is None:
            _services = Services.build(settings(), sender=_sender)
        return _services


def breaker_states() -> dict[str, BreakerState]:
    """Each model's breaker state in this process (for metrics; builds nothing).

    The deployment's summary model is listed as closed before its first call.
    """
    with _lock:
        services, current = _services, _settings
    states: dict[str, BreakerState] = {}
    if current is not None and current.llm_available:
        states[current.summary_model] = BreakerState.CLOSED
    if services is not None:
        states.update(services.llms.breaker_states())
    return states


def turn_stats() -> TurnStats | None:
    """The passes' turn gate so far (lcm/turns.py); ``None`` before services exist."""
    with _lock:
        services = _services
    return None if services is None else services.turns.stats()


def database() -> Database:
    return services().database


def compaction_jobs() -> CompactionJobs:
    """The process's job runner (one summarizer, one set of LLM breakers)."""
    return services().compaction_jobs("worker")

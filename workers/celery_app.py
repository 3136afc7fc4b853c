"""The Celery application and its production configuration.

The app's tasks, routes and beat schedule come from the job registry
(``lcm/job_types.py``). Nothing is configured at import: a process that
runs or sends jobs calls :func:`workers.bootstrap.bootstrap`, which applies
:func:`configure`. ``celery -A workers.main worker`` (or ``lcm worker``)
runs it; embedded mode (``lcm serve``) configures the same app with an
in-memory broker and runs the same task code in a thread of the API process.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import Celery
from kombu import Exchange, Queue

from lcm.job_types import BEAT, JOB_TYPES, QUEUES
from lcm.settings import Settings

__all__ = ["QUEUES", "TASK_ROUTES", "app", "beat_schedule", "broker_reachable", "configure"]

TASK_ROUTES = {job.name: {"queue": job.queue} for job in JOB_TYPES}

# What the registry declares, settings apart: each job type's task (in
# workers/tasks/<group>.py) and the queue it is routed to. ``configure``
# adds the rest.
app = Celery(
    "lcm",
    include=[f"workers.tasks.{group}" for group in dict.fromkeys(j.group for j in JOB_TYPES)],
    task_queues=[Queue(q, Exchange(q), routing_key=q) for q in QUEUES],
    task_default_queue="compaction",
    task_routes=TASK_ROUTES,
)


EVENTS: dict[str, Any] = {
    # Task events only while a monitor watches (Flower switches them on
    # itself): unwatched, they cost a worker 1-2 ms of CPU per task. `lcm
    # worker` must not pass --task-events, which overrides this.
    "worker_send_task_events": False,
    # No "task-sent" event per publish: it is a second Redis publish that
    # cost the sender (the API's wake-ups, a worker's chained passes)
    # ~0.5 ms of its ~1.2 ms per job, whether or not anything listens.
    # Flower shows a task from its worker's "received" on; what is still
    # queued shows as debt (lcm_compaction_debt) and on Flower's broker page.
    "task_send_sent_event": False,
}


# Loggers that write a line per job at INFO: Celery's "received" and
# "succeeded", and one per model request from the LLM SDK's HTTP client
# (httpx, or httpx2 in newer SDKs). Their warnings and errors (a task that
# raised, an unregistered task) pass either way.
JOB_LOGGERS = ("celery.worker.strategy", "celery.app.trace", "httpx", "httpx2")


def configure(settings: Settings) -> Celery:
    """Apply ``settings`` to the app (the tasks' runtime is ``workers.bootstrap``'s)."""
    # Set before a worker builds its tracers and strategies: Celery asks
    # these loggers once, then, whether INFO is on.
    for name in JOB_LOGGERS:
        logging.getLogger(name).setLevel(logging.NOTSET if settings.log_jobs else logging.WARNING)
    app.conf.update(
        broker_url=settings.broker_url,
        broker_transport=broker_transport(settings.broker_url),
        result_backend=settings.result_backend_url or None,
        broker_connection_retry_on_startup=True,
        # The API publishes wake-ups inside a request: a broker that is down
        # must cost a request a second, not a minute. The debt row is already
        # committed, so a lost wake-up is only late (the reconciler resends it).
        broker_connection_timeout=2,
        task_publish_retry_policy={
            "max_retries": 2,
            "interval_start": 0,
            "interval_step": 0.25,
            "interval_max": 0.5,
        },
        # A pass is acknowledged only when it finished: a worker that dies
        # mid-pass leaves the message to be redelivered. Tasks are idempotent
        # (the debt row's fencing token turns a duplicate into a no-op), so a
        # redelivery is harmless.
        task_acks_late=True,
        # With acks_late, a worker killed by SIGKILL or the OOM killer must
        # hand its message back rather than have it acknowledged.
        task_reject_on_worker_lost=True,
        # One reserved message per pool slot: a slow LLM call must not hide
        # other conversations' wake-ups in one worker's prefetch buffer.
        worker_prefetch_multiplier=1,
        # Redis redelivers unacknowledged messages after this long. Passes are
        # one LLM call each, far shorter than an hour; the debt row's lease,
        # not this timeout, is what recovers from a dead worker.
        broker_transport_options={"visibility_timeout": 3600},
        result_expires=3600,
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        **EVENTS,
        # No STARTED state in the result backend: nothing reads it (Flower
        # learns a task started from the events above), and it is one more
        # Redis write per pass on a worker that runs dozens a second.
        task_track_started=False,
        worker_hijack_root_logger=False,
        beat_schedule=beat_schedule(settings),
        timezone="UTC",
    )
    return app


def broker_transport(broker_url: str) -> str | None:
    """The kombu transport for ``broker_url``: ours for memory:// and Redis, else kombu's."""
    if broker_url.startswith("memory://"):
        # Embedded mode: woken by each publish rather than polling its queues
        # once a second (workers/memory_broker.py).
        return "workers.memory_broker:Transport"
    if broker_url.startswith(("redis://", "rediss://")):
        # Kombu's, sharing one Redis client per channel instead of building
        # one per publish and per acknowledgement (workers/redis_broker.py).
        return "workers.redis_broker:Transport"
    return None


def beat_schedule(settings: Settings) -> dict[str, dict[str, Any]]:
    """Beat's periodic jobs (``lcm.job_types.BEAT``); each expires after one interval
    (a stale run is skipped)."""
    schedule: dict[str, dict[str, Any]] = {}
    for periodic in BEAT:
        if periodic.when(settings):
            every = periodic.every(settings)
            schedule[periodic.entry] = {
                "task": periodic.job.name,
                "schedule": every,
                "options": {"queue": periodic.job.queue, "expires": every},
            }
    return schedule


def broker_reachable(timeout: float = 2.0) -> bool:
    """True when the broker answers within ``timeout`` seconds."""
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=timeout)
        return True
    except Exception:
        return False

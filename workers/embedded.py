"""The in-process worker of embedded mode (``lcm serve``).

One machine, no Redis: the API and a Celery worker share a process, an
in-memory broker and the SQLite engine. It is the same Celery task code as the
scaled deployment, run by a thread pool inside this process, so embedded mode
exercises exactly what a worker host would run.

There is no ``lcm beat`` either, so :class:`EmbeddedBeat` runs beat's schedule
(the reconcilers, the grant sweep and retention) in a thread of the same process.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from celery import Celery
from celery._state import _set_task_join_will_block
from celery.worker import WorkController

from lcm.job_types import COMPACTION_RECONCILE, FILES_RECONCILE, QUEUES
from lcm.services import Services
from workers.bootstrap import bootstrap
from workers.tasks.compaction import warm_up

log = logging.getLogger(__name__)


class EmbeddedWorker:
    """A Celery ``WorkController`` running in a daemon thread."""

    def __init__(self, services: Services) -> None:
        settings = services.settings
        app = bootstrap(settings, services)
        self._ready = threading.Event()
        app.finalize()
        app.set_current()
        app.set_default()
        self._controller = WorkController(
            app=app,
            hostname="embedded@localhost",
            pool_cls="threads",
            concurrency=settings.worker_concurrency,
            queues=list(QUEUES),
            # A single process has no peers to heartbeat, sync or gossip with.
            without_heartbeat=True,
            without_mingle=True,
            without_gossip=True,
            ready_callback=lambda _consumer: self._ready.set(),
        )
        self._thread = threading.Thread(
            target=self._controller.start, name="lcm-embedded-worker", daemon=True
        )
        self._beat = EmbeddedBeat(app)

    def start(self) -> None:
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("the embedded worker did not start within 30 s")
        # Starting a WorkController marks the process as a worker, where
        # waiting on a task result is refused (it could deadlock a pool slot).
        # Here the waiting side is the API's request threads, not a pool slot,
        # so the guard is lifted the same way Celery's own embedded test worker does.
        _set_task_join_will_block(False)
        # Its own ready callback replaces Celery's, which would send
        # ``worker_ready``: the warm-up a worker does then is done here,
        # before the API takes requests. Without it the first wake-ups of a
        # busy ``lcm serve`` waited many seconds on the summarizer's build
        # (the LLM SDK's import) under the API's load.
        warm_up()
        log.info("embedded worker started (%d threads)", self._controller.concurrency)
        self._beat.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._beat.stop(timeout)
        self._controller.stop(in_sighandler=False)
        self._thread.join(timeout)


# What a restart changes: the in-memory broker lost every message the previous
# process had queued (wake-ups, chained passes, file summaries), so none of
# them can be "on its way" and the first run waits no grace for them.
AFTER_RESTART: dict[str, dict[str, Any]] = {
    COMPACTION_RECONCILE.name: {"grace_seconds": 0.0},
    FILES_RECONCILE.name: {"grace_seconds": 0.0},
}


class EmbeddedBeat:
    """Beat's schedule (``beat_schedule``) run in a daemon thread of this process.

    Every job runs once right at start, then at its own interval. Jobs run
    here as plain calls of the same task functions beat would send: the
    reconcilers only read the database and enqueue wake-ups, which the
    in-process worker then runs. Duplicate wake-ups are harmless (the debt
    row's claim lets one through), so a run overlapping a turn is fine.
    """

    def __init__(self, app: Celery) -> None:
        self._app = app
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="lcm-embedded-beat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stopping.set()
        self._thread.join(timeout)

    def _loop(self) -> None:
        schedule = {
            entry["task"]: float(entry["schedule"])
            for entry in self._app.conf.beat_schedule.values()
        }
        for task in schedule:
            self._run(task, AFTER_RESTART.get(task, {}))
        due = {task: time.monotonic() + every for task, every in schedule.items()}
        while not self._stopping.wait(max(0.0, min(due.values()) - time.monotonic())):
            for task, at in due.items():
                if at <= time.monotonic():
                    self._run(task, {})
                    due[task] = time.monotonic() + schedule[task]

    def _run(self, task: str, kwargs: dict[str, Any]) -> None:
        try:
            outcome = self._app.tasks[task](**kwargs)
        except Exception:
            # A database hiccup must not end the schedule: the next run retries.
            log.exception("embedded beat: %s failed", task)
        else:
            log.debug("embedded beat: %s -> %s", task, outcome)

"""The in-process worker of embedded mode (``lcm serve``).

One machine, no Redis: the API and a Celery worker share a process, an
in-memory broker and the SQLite engine. It is the same Celery task code as the
scaled deployment, run by a thread pool inside this process, so embedded mode
exercises exactly what a worker host would run.
"""

from __future__ import annotations

import logging
import threading

from celery._state import _set_task_join_will_block
from celery.worker import WorkController

from lcm.db.engine import Database
from lcm.settings import Settings
from workers import runtime
from workers.celery_app import QUEUES, app, configure

log = logging.getLogger(__name__)


class EmbeddedWorker:
    """A Celery ``WorkController`` running in a daemon thread."""

    def __init__(self, settings: Settings, database: Database) -> None:
        configure(settings)
        self._ready = threading.Event()
        runtime.use_database(database)
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

    def start(self) -> None:
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("the embedded worker did not start within 30 s")
        # Starting a WorkController marks the process as a worker, where
        # waiting on a task result is refused (it could deadlock a pool slot).
        # Here the waiting side is the API's request threads, not a pool slot,
        # so the guard is lifted the same way Celery's own embedded test worker does.
        _set_task_join_will_block(False)
        log.info("embedded worker started (%d threads)", self._controller.concurrency)

    def stop(self, timeout: float = 10.0) -> None:
        self._controller.stop(in_sighandler=False)
        self._thread.join(timeout)

"""The worker side's composition root: one call wires a process that runs or sends jobs.

:func:`bootstrap` applies the settings to the Celery app (broker, queues,
routes, beat's schedule: ``workers/celery_app.py``) and installs the tasks'
runtime (``workers/runtime.py``) with the sender they hand work on with.
Its callers are the entry points: ``lcm worker``, ``lcm beat`` and
``lcm flower``, Celery's own command line through ``workers/main.py``, the
embedded worker of ``lcm serve`` (``workers/embedded.py``, sharing the API's
services) and a process that only sends (:func:`sender`). Importing a module
under ``workers/`` configures nothing.
"""

from __future__ import annotations

from celery import Celery

from lcm.services import Services
from lcm.settings import Settings, get_settings
from workers import log_context, runtime
from workers.celery_app import app, configure
from workers.sender import CelerySender


def bootstrap(settings: Settings, services: Services | None = None) -> Celery:
    """Configure the Celery app and the tasks' runtime for ``settings``; the app.

    ``services``: an existing process's services the tasks share (embedded
    mode: the API's own); their jobs go out through this app too. Without
    them, a worker builds its own on first use (after any fork).
    """
    configure(settings)
    log_context.install(settings)
    if services is None:
        runtime.use_settings(settings, CelerySender())
    else:
        if services.database.sender is None:
            services.database.sender = CelerySender()
        runtime.use_services(services)
    return app


def sender() -> CelerySender:
    """A sender over this process's app, bootstrapped from the environment if nothing did.

    The scaled API's: it sends jobs and waits for answers but runs none.
    """
    if not runtime.configured():
        bootstrap(get_settings())
    return CelerySender()

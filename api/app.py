"""The FastAPI application factory."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI
from prometheus_client import REGISTRY

from api import console, errors, openapi
from api.key_gate import KeyBeforeBody
from api.limits import BodySizeLimit
from api.metrics import DebtCollector, RequestMetrics
from api.rate_limit import RateLimiter, build_rate_limiter
from api.routes import (
    bootstrap,
    conversations,
    data,
    doctor,
    health,
    keys,
    lifecycle,
    tenant,
    tools,
)
from api.validation import Utf8Only
from lcm import __version__
from lcm.db.engine import Database
from lcm.heap import freeze_startup_heap
from lcm.outbox import JobSender
from lcm.services import Services
from lcm.settings import Settings, get_settings


def create_app(
    settings: Settings | None = None,
    *,
    services: Services | None = None,
    database: Database | None = None,
    broker_ping: Callable[[], bool] | None = None,
    sender: JobSender | None = None,
    rate_limiter: RateLimiter | None = None,
) -> FastAPI:
    """Build the app: the API process's composition root.

    ``services`` is passed by ``lcm serve`` (shared with its in-process
    worker); otherwise the app builds its own, over ``database`` if given.
    Migrations are not run here: that is an explicit step.
    """
    if services is None:
        services = Services.build(settings or get_settings(), database=database)
    settings = services.settings
    logging.basicConfig(level=settings.log_level)
    app = FastAPI(title="lcm-server", version=__version__, lifespan=_lifespan)
    app.state.services = services
    app.state.settings = settings
    app.state.database = services.database
    app.state.broker_ping = broker_ping or _default_broker_ping
    # Jobs leave with the commit of the unit of work that asked for them.
    services.database.sender = sender or services.database.sender or _celery_sender()
    # One limiter per process: Redis-backed buckets are shared with every other
    # API process; without Redis (embedded) this process holds them.
    app.state.rate_limiter = rate_limiter or build_rate_limiter(settings.rate_limit_store_url)
    errors.install(app)
    openapi.install(app)
    app.include_router(health.router)
    app.include_router(tenant.router)
    app.include_router(doctor.router)
    app.include_router(keys.router)
    app.include_router(bootstrap.router)
    app.include_router(lifecycle.router)  # before conversations: its paths are more specific
    app.include_router(data.router)  # before conversations: …/export must not read as a key
    app.include_router(conversations.router)
    app.include_router(tools.router)
    console.install(app)  # /console: the operator's pages (HTML, cookie sign-in)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    # Outside the body limit: a request without an active key is refused before its body.
    app.add_middleware(KeyBeforeBody, database=services.database)
    app.add_middleware(Utf8Only)
    app.add_middleware(RequestMetrics)
    app.add_middleware(console.ConsoleHeaders)  # outermost: refusals before routing carry them
    _register_debt_metrics(app.state.database)
    return app


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    # The app is built and the server is about to take requests: its hot
    # statements are compiled now rather than by the first requests, and
    # what is alive then lives as long as the process (see lcm/heap.py).
    app.state.database.compile_statements()
    freeze_startup_heap()
    yield


_debt_collector: DebtCollector | None = None


def _register_debt_metrics(database: Database) -> None:
    """One debt collector per process (the registry is global); the newest app's DB wins."""
    global _debt_collector
    if _debt_collector is None:
        _debt_collector = DebtCollector(database)
        REGISTRY.register(_debt_collector)
    _debt_collector.database = database


def _celery_sender() -> JobSender:
    from workers.bootstrap import sender

    return sender()


def _default_broker_ping() -> bool:
    from workers.celery_app import broker_reachable

    return broker_reachable()

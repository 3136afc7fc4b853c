"""The FastAPI application factory."""

from __future__ import annotations

import logging
from collections.abc import Callable

from fastapi import FastAPI
from prometheus_client import REGISTRY

from api import errors, openapi
from api.limits import BodySizeLimit
from api.metrics import DebtCollector, RequestMetrics
from api.routes import bootstrap, conversations, data, health, lifecycle, tenant, tools
from api.validation import Utf8Only
from lcm import __version__
from lcm.db.engine import Database
from lcm.outbox import JobSender
from lcm.settings import Settings, get_settings


def create_app(
    settings: Settings | None = None,
    *,
    database: Database | None = None,
    broker_ping: Callable[[], bool] | None = None,
    sender: JobSender | None = None,
) -> FastAPI:
    """Build the app. Migrations are not run here: that is an explicit step."""
    settings = settings or get_settings()
    logging.basicConfig(level=settings.log_level)
    app = FastAPI(title="lcm-server", version=__version__)
    app.state.settings = settings
    app.state.database = database or Database(settings)
    app.state.broker_ping = broker_ping or _default_broker_ping
    # Jobs leave with the commit of the unit of work that asked for them.
    app.state.database.sender = sender or app.state.database.sender or _celery_sender()
    app.state.inline_jobs = None
    errors.install(app)
    openapi.install(app)
    app.include_router(health.router)
    app.include_router(tenant.router)
    app.include_router(bootstrap.router)
    app.include_router(lifecycle.router)  # before conversations: its paths are more specific
    app.include_router(data.router)  # before conversations: …/export must not read as a key
    app.include_router(conversations.router)
    app.include_router(tools.router)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(Utf8Only)
    app.add_middleware(RequestMetrics)
    _register_debt_metrics(app.state.database)
    return app


_debt_collector: DebtCollector | None = None


def _register_debt_metrics(database: Database) -> None:
    """One debt collector per process (the registry is global); the newest app's DB wins."""
    global _debt_collector
    if _debt_collector is None:
        _debt_collector = DebtCollector(database)
        REGISTRY.register(_debt_collector)
    _debt_collector.database = database


def _celery_sender() -> JobSender:
    from workers.sender import CelerySender

    return CelerySender()


def _default_broker_ping() -> bool:
    from workers.celery_app import broker_reachable

    return broker_reachable()

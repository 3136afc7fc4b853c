"""The FastAPI application factory."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI
from prometheus_client import REGISTRY
from starlette.types import ASGIApp

from api import console, errors, openapi
from api.fast_path import TurnFastPath
from api.heavy_work import HeavyShare
from api.key_gate import KeyBeforeBody, KnownKeys
from api.limits import BodySizeLimit
from api.metrics import DebtCollector, RequestMetrics
from api.rate_limit import RateLimiter, build_rate_limiter
from api.request_context import RequestContext
from api.routes import (
    bootstrap,
    conversations,
    data,
    doctor,
    health,
    keys,
    lifecycle,
    secrets_access,
    secrets_ops,
    surgery,
    tenant,
    tools,
)
from api.validation import Utf8Only
from lcm import __version__
from lcm.db.engine import Database
from lcm.heap import freeze_startup_heap
from lcm.logs import configure_logging
from lcm.outbox import JobSender
from lcm.semantic import warm_embedder
from lcm.services import Services
from lcm.settings import Settings, get_settings
from lcm.worker_link import WorkerLink


def create_app(
    settings: Settings | None = None,
    *,
    link: WorkerLink,
    services: Services | None = None,
    database: Database | None = None,
    broker_ping: Callable[[], bool] | None = None,
    sender: JobSender | None = None,
    rate_limiter: RateLimiter | None = None,
) -> FastAPI:
    """Build the app: the API process's composition root.

    ``link`` is the worker side (``workers/link.py`` over Celery), handed in
    by the caller so that ``api/`` never imports ``workers/``; ``sender`` and
    ``broker_ping`` override its parts (tests). ``services`` is passed by
    ``lcm serve`` (shared with its in-process worker); otherwise the app
    builds its own, over ``database`` if given. Migrations are not run here:
    that is an explicit step.
    """
    if services is None:
        services = Services.build(settings or get_settings(), database=database)
    settings = services.settings
    configure_logging(settings.log_level, settings.log_format)
    app = LcmApp(title="lcm-server", version=__version__, lifespan=_lifespan)
    app.state.services = services
    app.state.settings = settings
    app.state.database = services.database
    app.state.link = link
    app.state.broker_ping = broker_ping or link.broker_reachable
    # Jobs leave with the commit of the unit of work that asked for them.
    services.database.sender = sender or services.database.sender or link.sender()
    # One limiter per process: Redis-backed buckets are shared with every other
    # API process; without Redis (embedded) this process holds them.
    app.state.rate_limiter = rate_limiter or build_rate_limiter(settings.rate_limit_store_url)
    app.state.heavy_share = HeavyShare.from_settings(settings)
    errors.install(app)
    openapi.install(app)
    app.include_router(conversations.turn_router)  # first: a gateway's turns (see there)
    app.state.turn_routes = list(conversations.turn_router.routes)  # for api/fast_path.py
    app.include_router(health.router)
    app.include_router(tenant.router)
    app.include_router(secrets_ops.router)
    app.include_router(doctor.router)
    app.include_router(surgery.router)
    app.include_router(keys.router)
    app.include_router(secrets_access.router)
    app.include_router(bootstrap.router)
    app.include_router(lifecycle.router)  # before conversations: its paths are more specific
    app.include_router(data.router)  # before conversations: …/export must not read as a key
    app.include_router(conversations.router)
    app.include_router(tools.router)
    console.install(app)  # /console: the operator's pages (HTML, cookie sign-in)
    _install_middleware(app, settings, services.database)
    _register_debt_metrics(app.state.database)
    return app


def _install_middleware(app: FastAPI, settings: Settings, database: Database) -> None:
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    # Outside the body limit: a request without an active key is refused before its body.
    # One memo of keys that passed the gate, read by the turns' fast path too.
    app.state.known_keys = KnownKeys()
    app.add_middleware(KeyBeforeBody, database=database, known=app.state.known_keys)
    app.add_middleware(Utf8Only)
    app.add_middleware(RequestMetrics)
    app.add_middleware(console.ConsoleHeaders)  # refusals before routing carry them
    # Outermost of these (api/fast_path.py is outside them all): every line of a
    # request carries its id.
    app.add_middleware(RequestContext)


class LcmApp(FastAPI):
    """The app, with the gateway turn's fast path outside its middleware stack."""

    def build_middleware_stack(self) -> ASGIApp:
        # Outermost: an ordinary turn request is served there in one layer,
        # every other request by the full stack (api/fast_path.py).
        return TurnFastPath(super().build_middleware_stack(), self, self.state.turn_routes)


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    # The app is built and the server is about to take requests: its hot
    # statements are compiled now rather than by the first requests, and
    # what is alive then lives as long as the process (see lcm/heap.py).
    app.state.database.compile_statements()
    freeze_startup_heap()
    if app.state.settings.semantic:
        # In the background: assembly's recall by meaning goes without the
        # model until it is loaded rather than wait for it (lcm.retrieval.prompt_meaning).
        warm_embedder()
    yield


_debt_collector: DebtCollector | None = None


def _register_debt_metrics(database: Database) -> None:
    """One debt collector per process (the registry is global); the newest app's DB wins."""
    global _debt_collector
    if _debt_collector is None:
        _debt_collector = DebtCollector(database)
        REGISTRY.register(_debt_collector)
    _debt_collector.database = database

"""FastAPI dependencies: settings, a database session per request, the tenant."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from api.rate_limit import RATE_LIMITED, BucketLimit, RateLimiter
from lcm.db.engine import Database
from lcm.errors import RateLimited, Unauthenticated
from lcm.settings import Settings
from lcm.tenants.service import authenticate, effective_settings


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def get_database(request: Request) -> Database:
    database: Database = request.app.state.database
    return database


def get_session(database: Annotated[Database, Depends(get_database)]) -> Iterator[Session]:
    """The request's unit of work: committed when the route returns, rolled back if it raises.

    Routes never commit. The commit sends the jobs the request asked for
    (``lcm/outbox.py``), and it happens before the response is sent (the
    dependency's scope is the route function), so a client never sees 200
    for a write that did not commit. A route that must act on committed
    state before it answers (inline compaction, a wait) opens
    ``database.transaction()`` for that part instead.
    """
    with database.session() as session:
        yield session
        session.commit()


def get_read_session(database: Annotated[Database, Depends(get_database)]) -> Iterator[Session]:
    """A read-only session for routes that write nothing (no write lock on SQLite)."""
    with database.read_session() as session:
        yield session


def get_tenant_id(request: Request, database: Annotated[Database, Depends(get_database)]) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated("send 'Authorization: Bearer <tenant key>'")
    # A short read-only session of its own: looking a key up must never wait
    # for (or hold) the write lock, nor keep the request's transaction open.
    with database.read_session() as session:
        return authenticate(session, token.strip())


def get_rate_limited_tenant_id(
    request: Request,
    tenant_id: Annotated[str, Depends(get_tenant_id)],
    database: Annotated[Database, Depends(get_database)],
    settings: Annotated[Settings, Depends(get_settings)],
) -> str:
    """The authenticated tenant, after taking one token from its request bucket.

    After authentication (an unknown key spends nobody's bucket), before the
    route. Routes without a tenant (``/healthz``, ``/readyz``, ``/metrics``)
    are never limited.
    """
    with database.read_session() as session:
        limit = BucketLimit.of(effective_settings(session, tenant_id, settings))
    if limit is None:
        return tenant_id
    limiter: RateLimiter = request.app.state.rate_limiter
    decision = limiter.take(tenant_id, limit)
    if not decision.allowed:
        RATE_LIMITED.labels(tenant_id).inc()
        raise RateLimited(
            f"more than {limit.rate:g} requests a second (burst {limit.burst}); "
            "retry after the Retry-After header's seconds",
            retry_after=decision.retry_after_header,
        )
    return tenant_id


SettingsDep = Annotated[Settings, Depends(get_settings)]
DatabaseDep = Annotated[Database, Depends(get_database)]
SessionDep = Annotated[Session, Depends(get_session, scope="function")]
ReadSessionDep = Annotated[Session, Depends(get_read_session)]
TenantDep = Annotated[str, Depends(get_rate_limited_tenant_id)]

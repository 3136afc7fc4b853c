"""FastAPI dependencies: settings, a database session per request, the scoped tenant.

Every ``/v1`` route names the scope it needs in its signature, through one
of ``IngestTenant``, ``ReadTenant`` or ``AdminTenant``: the dependency
authenticates the key (401), checks its scope (403), takes one token from
the tenant's request bucket (429) and hands the route the tenant id.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Annotated

from fastapi import Depends, Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, iter_route_contexts
from sqlalchemy.orm import Session
from starlette.routing import BaseRoute

from api.rate_limit import RATE_LIMITED, BucketLimit, RateLimiter
from lcm.db.engine import Database
from lcm.errors import RateLimited, Unauthenticated
from lcm.services import Services
from lcm.settings import Settings
from lcm.tenants.keys import Scope, authenticate
from lcm.tenants.service import effective_settings


def app_settings(request: Request) -> Settings:
    """The settings the app was built with (not re-read from the environment)."""
    settings: Settings = request.app.state.settings
    return settings


def get_services(request: Request) -> Services:
    """The API process's shared parts (built once by ``create_app``)."""
    services: Services = request.app.state.services
    return services


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


def get_snapshot_session(database: Annotated[Database, Depends(get_database)]) -> Iterator[Session]:
    """A read-only session seeing one snapshot, for routes reading a context in several queries.

    On Postgres each statement of an ordinary session sees the commits made
    before it: a compaction pass committing between the context items query
    and the messages query would leave an item whose message is gone.
    """
    with database.snapshot_session() as session:
        yield session


class RequireScope:
    """Dependency: the calling tenant's id, if its key is valid (401), holds ``scope``
    (403) and its tenant is within its request rate (429)."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope

    def __call__(
        self,
        request: Request,
        database: Annotated[Database, Depends(get_database)],
        settings: Annotated[Settings, Depends(app_settings)],
    ) -> str:
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated("send 'Authorization: Bearer <tenant key>'")
        # A short read-only session of its own, on every request (no cache, so
        # a revoked key is refused on its next request): looking a key up must
        # never wait for (or hold) the write lock, nor keep the request's
        # transaction open. The tenant's limits are read in the same session.
        with database.read_session() as session:
            principal = authenticate(session, token.strip())
            principal.require(self.scope)
            limit = BucketLimit.of(effective_settings(session, principal.tenant_id, settings))
        if limit is not None:
            # After authentication and the scope check: a bad or forbidden key
            # spends nobody's bucket.
            take_rate_token(request.app.state.rate_limiter, principal.tenant_id, limit)
        return principal.tenant_id


def take_rate_token(limiter: RateLimiter, tenant_id: str, limit: BucketLimit) -> None:
    """One token from the tenant's bucket, or :class:`RateLimited` (429 with Retry-After)."""
    decision = limiter.take(tenant_id, limit)
    if not decision.allowed:
        RATE_LIMITED.labels(tenant_id).inc()
        raise RateLimited(
            f"more than {limit.rate:g} requests a second (burst {limit.burst}); "
            "retry after the Retry-After header's seconds",
            retry_after=decision.retry_after_header,
        )


def operation_scopes(routes: Sequence[BaseRoute]) -> dict[tuple[str, str], Scope | None]:
    """``(method, path template) -> scope`` of every API operation in ``routes`` (None: no key).

    Walks the app's route table as FastAPI resolves it (included routers
    too), so the OpenAPI document and the tests see every route.
    """
    found: dict[tuple[str, str], Scope | None] = {}
    for route in iter_route_contexts(routes):
        if isinstance(route.original_route, APIRoute):
            scope = _required_scope(route.dependant)
            for method in route.methods or ():
                found[(method, str(route.path_format))] = scope
    return found


def _required_scope(dependant: Dependant) -> Scope | None:
    pending = list(dependant.dependencies)
    while pending:
        current = pending.pop()
        if isinstance(current.call, RequireScope):
            return current.call.scope
        pending.extend(current.dependencies)
    return None


SettingsDep = Annotated[Settings, Depends(app_settings)]
DatabaseDep = Annotated[Database, Depends(get_database)]
ServicesDep = Annotated[Services, Depends(get_services)]
SessionDep = Annotated[Session, Depends(get_session, scope="function")]
ReadSessionDep = Annotated[Session, Depends(get_read_session)]
SnapshotSessionDep = Annotated[Session, Depends(get_snapshot_session)]
IngestTenant = Annotated[str, Depends(RequireScope("ingest"))]
ReadTenant = Annotated[str, Depends(RequireScope("read"))]
AdminTenant = Annotated[str, Depends(RequireScope("admin"))]

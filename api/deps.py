"""FastAPI dependencies: settings, a database session per request, the scoped tenant.

Every ``/v1`` route names the scope it needs in its signature, through one
of ``IngestTenant``, ``ReadTenant`` or ``AdminTenant``: the dependency
authenticates the key (401), checks its scope (403), takes one token from
the tenant's request bucket (429) and hands the route the tenant id.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from types import TracebackType
from typing import Annotated

from fastapi import Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, iter_route_contexts
from sqlalchemy.orm import Session
from starlette.routing import BaseRoute

from api.rate_limit import RATE_LIMITED, BucketLimit, RateLimiter
from lcm.db.engine import Database
from lcm.errors import RateLimited, Unauthenticated
from lcm.services import Services
from lcm.settings import Settings
from lcm.tenants.keys import Scope, authenticate_with_tenant
from lcm.tenants.service import with_overrides

# The dependencies that only look something up are ``async``: FastAPI runs a
# plain ``def`` dependency in its thread pool, a hop per dependency per request.


async def app_settings(request: Request) -> Settings:
    """The settings the app was built with (not re-read from the environment)."""
    settings: Settings = request.app.state.settings
    return settings


async def get_services(request: Request) -> Services:
    """The API process's shared parts (built once by ``create_app``)."""
    services: Services = request.app.state.services
    return services


async def get_database(request: Request) -> Database:
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


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated request's tenant and that tenant's effective settings.

    The settings are the ones read with the key (one read per request): a
    route taking a ``Caller`` does not read them again.
    """

    tenant_id: str
    settings: Settings


class ScopedKey:
    """Base of the key dependencies: authenticates the key (401), checks that it
    holds ``scope`` (403) and that its tenant is within its request rate (429)."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope

    def caller(self, request: Request, session: Session, settings: Settings) -> Caller:
        """The caller, looked up in ``session`` (a read-only one: see the subclasses)."""
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated("send 'Authorization: Bearer <tenant key>'")
        # On every request (no cache, so a revoked key is refused on its next
        # request). The tenant's settings are read in the same session.
        principal, overrides = authenticate_with_tenant(session, token.strip())
        principal.require(self.scope)
        effective = with_overrides(settings, overrides)
        limit = BucketLimit.of(effective)
        if limit is not None:
            # After authentication and the scope check: a bad or forbidden key
            # spends nobody's bucket.
            take_rate_token(request.app.state.rate_limiter, principal.tenant_id, limit)
        return Caller(principal.tenant_id, effective)


class RequireCaller(ScopedKey):
    """Dependency: the calling tenant and its effective settings (see :class:`ScopedKey`).

    The key is looked up in a short read-only session of its own: looking a
    key up must never wait for (or hold) the write lock, nor keep the
    request's own transaction open. A route taking the caller uses its
    settings instead of reading the tenant again.
    """

    def __call__(
        self,
        request: Request,
        database: Annotated[Database, Depends(get_database)],
        settings: Annotated[Settings, Depends(app_settings)],
    ) -> Caller:
        with database.lookup_session() as session:
            return self.caller(request, session, settings)


class RequireScope(ScopedKey):
    """Dependency: the calling tenant's id, the key looked up as :class:`RequireCaller` does."""

    def __call__(
        self,
        request: Request,
        database: Annotated[Database, Depends(get_database)],
        settings: Annotated[Settings, Depends(app_settings)],
    ) -> str:
        with database.lookup_session() as session:
            return self.caller(request, session, settings).tenant_id


class SnapshotRead:
    """An authenticated caller and the read-only snapshot session it was looked up in.

    The route ends the snapshot itself, ``with read:`` around its work, in
    its own thread: ending it is a COMMIT round trip, and left to the
    dependency it would take one more thread-pool hop per request.
    """

    def __init__(
        self, scope: AbstractContextManager[Session], session: Session, caller: Caller
    ) -> None:
        self._scope: AbstractContextManager[Session] | None = scope
        self.session = session
        self.caller = caller

    def __enter__(self) -> SnapshotRead:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        scope, self._scope = self._scope, None
        if scope is not None:
            scope.__exit__(kind, error, trace)

    @property
    def open(self) -> bool:
        return self._scope is not None


class RequireSnapshotRead(ScopedKey):
    """Dependency for routes reading a context in several queries: one read-only
    session seeing one snapshot, and the caller looked up in it.

    On Postgres each statement of an ordinary session sees the commits made
    before it: a compaction pass committing between the context items query
    and the messages query would leave an item whose message is gone. The
    session is read-only, so the key lookup in it takes no write lock; one
    session instead of two saves the round trips of a second one (a
    connection check, BEGIN, COMMIT).

    Two thread-pool hops per request, not three: the session is opened and
    the key looked up in one hop, the route ends the session in its own
    (see :class:`SnapshotRead`), and this dependency ends it only when the
    route did not (a body refused before the route ran, say).
    """

    async def __call__(
        self,
        request: Request,
        database: Annotated[Database, Depends(get_database)],
        settings: Annotated[Settings, Depends(app_settings)],
    ) -> AsyncIterator[SnapshotRead]:
        read = await run_in_threadpool(self._open, request, database, settings)
        try:
            yield read
        finally:
            if read.open:
                await run_in_threadpool(read.__exit__, *sys.exc_info())

    def _open(self, request: Request, database: Database, settings: Settings) -> SnapshotRead:
        scope = database.snapshot_session()
        session = scope.__enter__()
        try:
            caller = self.caller(request, session, settings)
        except BaseException:
            scope.__exit__(*sys.exc_info())  # a refused key: the snapshot ends here
            raise
        return SnapshotRead(scope, session, caller)


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
        if isinstance(current.call, ScopedKey):
            return current.call.scope
        pending.extend(current.dependencies)
    return None


SettingsDep = Annotated[Settings, Depends(app_settings)]
DatabaseDep = Annotated[Database, Depends(get_database)]
ServicesDep = Annotated[Services, Depends(get_services)]
SessionDep = Annotated[Session, Depends(get_session, scope="function")]
ReadSessionDep = Annotated[Session, Depends(get_read_session)]
IngestTenant = Annotated[str, Depends(RequireScope("ingest"))]
IngestCaller = Annotated[Caller, Depends(RequireCaller("ingest"))]
ReadTenant = Annotated[str, Depends(RequireScope("read"))]
SnapshotReadDep = Annotated[SnapshotRead, Depends(RequireSnapshotRead("read"))]
AdminTenant = Annotated[str, Depends(RequireScope("admin"))]

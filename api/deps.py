"""FastAPI dependencies: settings, a database session per request, the scoped tenant.

Every ``/v1`` route names the scope it needs in its signature, through one
of ``IngestCaller``, ``ReadCaller`` or ``AdminCaller``: the dependency
authenticates the key (401), checks its scope (403), takes one token from
the tenant's request bucket (429) and hands the route the :class:`Caller`
(tenant, key, scopes and the tenant's effective settings, read once). The
routes of a gateway turn take ``IngestKey`` or ``SnapshotReadDep`` instead,
and look the key up themselves (see :class:`KeyCheck`).

Transactions, one rule: a route that writes takes ``SessionDep`` (the
request's unit of work, committed when the route returns) unless it must act
on committed state before it answers (an inline sweep, a wait for a worker,
a job another process reads) or is a hot path where the dependency's
thread-pool hops show; those pass ``database.transaction`` (or the
``Database``) to one use case, which opens its own units of work. A route
never opens one transaction beside another.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from types import TracebackType
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, iter_route_contexts
from sqlalchemy.orm import Session
from starlette.routing import BaseRoute

from api.rate_limit import RATE_LIMITED, BucketLimit, RateLimiter
from lcm.db.engine import Database
from lcm.errors import RateLimited, Unauthenticated
from lcm.logs import add_log_fields
from lcm.services import Services
from lcm.settings import Settings
from lcm.tenants.keys import Principal, Scope, authenticate_with_tenant, remembered_key
from lcm.tenants.service import with_overrides
from lcm.worker_link import WorkerLink

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


async def get_worker_link(request: Request) -> WorkerLink:
    """The worker side, handed to ``create_app`` by its caller (api/ never imports workers/)."""
    link: WorkerLink = request.app.state.link
    return link


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


def get_snapshot_session(
    database: Annotated[Database, Depends(get_database)],
) -> Iterator[Session]:
    """A read-only session seeing one snapshot, for pages that read a context several times.

    At READ COMMITTED a compaction pass committing between the reads would
    show the window of one moment next to the DAG and runs of another.
    """
    with database.snapshot_session() as session:
        yield session


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated request: its tenant, key, scopes and the tenant's effective settings.

    The settings are the ones read with the key (one read per request, by
    :func:`lcm.tenants.service.with_overrides`): a route taking a ``Caller``
    does not read them again.
    """

    tenant_id: str
    key_id: int
    scopes: frozenset[str]
    settings: Settings


class ScopedKey:
    """Base of the key dependencies: authenticates the key (401), checks that it
    holds ``scope`` (403) and that its tenant is within its request rate (429)."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope

    def bearer(self, request: Request) -> str:
        """The request's bearer token, or 401 (no lookup: refused before any database work)."""
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated("send 'Authorization: Bearer <tenant key>'")
        return token.strip()

    def resolve(
        self, limiter: RateLimiter, session: Session, token: str, settings: Settings
    ) -> Caller:
        """The caller holding ``token``, looked up in ``session`` unless remembered."""
        found = remembered_key(token, settings.key_cache_seconds)
        if found is None:
            # The tenant's settings are read in the same statement.
            found = authenticate_with_tenant(
                session, token, remember_seconds=settings.key_cache_seconds
            )
        return self.admit(limiter, found, settings)

    def admit(
        self, limiter: RateLimiter, found: tuple[Principal, dict[str, Any]], settings: Settings
    ) -> Caller:
        """The :class:`Caller` of an authenticated key: its scope (403) and rate (429) checked."""
        principal, overrides = found
        add_log_fields(tenant_id=principal.tenant_id)
        principal.require(self.scope)
        effective = with_overrides(settings, overrides)
        limit = BucketLimit.of(effective)
        if limit is not None:
            # After authentication and the scope check: a bad or forbidden key
            # spends nobody's bucket.
            take_rate_token(limiter, principal.tenant_id, limit)
        return Caller(principal.tenant_id, principal.key_id, principal.scopes, effective)


class RequireScope(ScopedKey):
    """Dependency: the :class:`Caller`, the key looked up as :meth:`KeyCheck.caller` does."""

    def __call__(
        self,
        request: Request,
        database: Annotated[Database, Depends(get_database)],
        settings: Annotated[Settings, Depends(app_settings)],
    ) -> Caller:
        return KeyCheck(self, request, database, settings).caller()


# The routes of a gateway turn check their key in their own thread-pool hop,
# one per request. A sync dependency doing the lookup would be a hop of its
# own, and one API process serving a gateway is CPU-bound on such hand-offs
# (CHANGELOG.md). Their dependencies below are ``async`` and only read the
# header (a request without a bearer token is refused before any hop); the
# lookup runs when the route asks for the caller. Before its body was read the
# key passed ``api/key_gate.py`` (an active key, remembered a minute), so a
# body refused here is answered 400 without another lookup.


class KeyCheck:
    """A request's bearer token, looked up when the route asks for its :meth:`caller`."""

    __slots__ = ("_database", "_limiter", "_scoped", "_settings", "_token")

    def __init__(
        self, scoped: ScopedKey, request: Request, database: Database, settings: Settings
    ) -> None:
        self._scoped = scoped
        self._token = scoped.bearer(request)
        self._limiter: RateLimiter = request.app.state.rate_limiter
        self._database = database
        self._settings = settings

    def caller(self) -> Caller:
        """The calling tenant and its effective settings (401/403/429 as :class:`ScopedKey`).

        Looked up in a short read-only session of its own, as
        :class:`RequireScope` does: a key lookup never waits for (or holds)
        the write lock, nor keeps the route's own transaction open.
        """
        found = remembered_key(self._token, self._settings.key_cache_seconds)
        if found is not None:  # no session at all (lcm/tenants/key_cache.py)
            return self._scoped.admit(self._limiter, found, self._settings)
        with self._database.lookup_session() as session:
            return self.resolve(session)

    def resolve(self, session: Session) -> Caller:
        """The caller, looked up in ``session`` (one the route has opened)."""
        return self._scoped.resolve(self._limiter, session, self._token, self._settings)


class RequireKeyCheck(ScopedKey):
    """Dependency: the request's :class:`KeyCheck` for ``scope`` (no lookup yet)."""

    async def __call__(
        self,
        request: Request,
        database: Annotated[Database, Depends(get_database)],
        settings: Annotated[Settings, Depends(app_settings)],
    ) -> KeyCheck:
        return KeyCheck(self, request, database, settings)


class SnapshotRead:
    """A read-only session seeing one snapshot, and the caller looked up in it.

    For routes reading a context in several queries. On Postgres each
    statement of an ordinary session sees the commits made before it: a
    compaction pass committing between the context items query and the
    messages query would leave an item whose message is gone. The session is
    read-only, so the key lookup in it takes no write lock; one session
    instead of two saves the round trips of a second one (a connection
    check, BEGIN, COMMIT).

    ``with read as (session, caller):`` opens the snapshot and looks the key
    up, in the route's thread; leaving the block ends the snapshot there.
    """

    __slots__ = ("_check", "_database", "_scope")

    def __init__(self, check: KeyCheck, database: Database) -> None:
        self._check = check
        self._database = database
        self._scope: AbstractContextManager[Session] | None = None

    def __enter__(self) -> tuple[Session, Caller]:
        scope = self._database.snapshot_session()
        session = scope.__enter__()
        try:
            caller = self._check.resolve(session)
        except BaseException:
            scope.__exit__(*sys.exc_info())  # a refused key: the snapshot ends here
            raise
        self._scope = scope
        return session, caller

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        scope, self._scope = self._scope, None
        if scope is not None:
            scope.__exit__(kind, error, trace)


class RequireSnapshotRead(ScopedKey):
    """Dependency: the request's :class:`SnapshotRead` for ``scope`` (nothing opened yet)."""

    async def __call__(
        self,
        request: Request,
        database: Annotated[Database, Depends(get_database)],
        settings: Annotated[Settings, Depends(app_settings)],
    ) -> SnapshotRead:
        return SnapshotRead(KeyCheck(self, request, database, settings), database)


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
SnapshotSessionDep = Annotated[Session, Depends(get_snapshot_session)]
WorkerLinkDep = Annotated[WorkerLink, Depends(get_worker_link)]
IngestCaller = Annotated[Caller, Depends(RequireScope("ingest"))]
IngestKey = Annotated[KeyCheck, Depends(RequireKeyCheck("ingest"))]
ReadCaller = Annotated[Caller, Depends(RequireScope("read"))]
SnapshotReadDep = Annotated[SnapshotRead, Depends(RequireSnapshotRead("read"))]
AdminCaller = Annotated[Caller, Depends(RequireScope("admin"))]

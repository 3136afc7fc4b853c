"""FastAPI dependencies: settings, a database session per request, the tenant."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from lcm.db.engine import Database
from lcm.errors import Unauthenticated
from lcm.services import Services
from lcm.settings import Settings
from lcm.tenants.service import authenticate


def get_settings(request: Request) -> Settings:
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


def get_tenant_id(request: Request, database: Annotated[Database, Depends(get_database)]) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated("send 'Authorization: Bearer <tenant key>'")
    # A short read-only session of its own: looking a key up must never wait
    # for (or hold) the write lock, nor keep the request's transaction open.
    with database.read_session() as session:
        return authenticate(session, token.strip())


SettingsDep = Annotated[Settings, Depends(get_settings)]
DatabaseDep = Annotated[Database, Depends(get_database)]
ServicesDep = Annotated[Services, Depends(get_services)]
SessionDep = Annotated[Session, Depends(get_session, scope="function")]
ReadSessionDep = Annotated[Session, Depends(get_read_session)]
TenantDep = Annotated[str, Depends(get_tenant_id)]

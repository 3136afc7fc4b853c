"""What the ``lcm`` commands that read or write conversations share."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer
from rich.console import Console
from sqlalchemy.orm import Session

from lcm.conversations.session_keys import normalized_session_key
from lcm.db.engine import Database
from lcm.errors import InvalidSessionKey, LcmError, NotFound
from lcm.settings import Settings, get_settings
from lcm.tenants.service import find_tenant

console = Console(stderr=True)  # progress and errors
out = Console()  # results


def session_key(value: str) -> str:
    """A session key given on the command line, in NFC; a usage error if it may not be one."""
    try:
        return normalized_session_key(value)
    except InvalidSessionKey as exc:
        raise typer.BadParameter(exc.message) from exc


TenantOpt = Annotated[str, typer.Option("--tenant", help="Tenant name.")]
KeyArg = Annotated[str, typer.Argument(help="Session key.", callback=session_key)]
SessionOpt = Annotated[str | None, typer.Option(help="A session id of the family.")]
BudgetOpt = Annotated[int | None, typer.Option(help="Token budget (default from settings).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]

if TYPE_CHECKING:
    from lcm.services import Services

T = TypeVar("T")


def require_schema(settings: Settings) -> None:
    """Bring the database to the code's schema, or stop with what to run.

    The embedded database belongs to this installation, so a command upgrades
    it like `lcm serve` does (a newcomer's first command may be `lcm import`).
    A shared Postgres is migrated as an explicit step: exit 2 with the command.
    """
    from lcm.db import current_revision, head_revision, upgrade

    if settings.is_sqlite:
        upgrade(settings.database_url)
        return
    current, head = current_revision(settings.database_url), head_revision()
    if current != head:
        console.print(
            f"[red]The database schema is at {current or 'nothing'}, this version needs "
            f"{head}: run `lcm db upgrade`.[/red]"
        )
        raise typer.Exit(2)


@contextmanager
def open_services() -> Iterator[Services]:
    """The CLI's composition root for commands that need more than the database.

    Builds the process's :class:`~lcm.services.Services` once (the LLM client
    only if the command summarizes); a domain error exits 1 with its message.
    """
    from lcm.services import Services

    settings = get_settings()
    require_schema(settings)
    services = Services.build(settings)
    try:
        yield services
    except LcmError as exc:
        console.print(f"[red]{exc.message}[/red]")
        raise typer.Exit(1) from exc
    finally:
        services.close()


def in_session(work: Callable[[Session], T], *, send_jobs: bool = False) -> T:
    """Run ``work`` in one committed session; a domain error exits 1 with its message.

    The composition root of the database-only commands: they need an engine
    and nothing else (``lcm import`` builds the full :class:`~lcm.services.Services`).
    ``send_jobs``: the jobs ``work`` asks for go to the broker after the commit
    (otherwise they are left to the reconcilers).
    """
    settings = get_settings()
    require_schema(settings)
    database = Database(settings)
    if send_jobs:
        from workers.bootstrap import sender  # imported late: it imports Celery

        database.sender = sender()
    try:
        with database.session() as session:
            result = work(session)
            session.commit()
            return result
    except LcmError as exc:
        console.print(f"[red]{exc.message}[/red]")
        raise typer.Exit(1) from exc
    finally:
        database.dispose()


def tenant_id_for(session: Session, name: str) -> str:
    found = find_tenant(session, name)
    if found is None:
        raise NotFound(f"no tenant named {name!r} (create it with `lcm tenant create {name}`)")
    return found.id


def setting_assignment(text: str) -> tuple[str, object]:
    """``NAME=VALUE`` from the command line: the value as JSON, else as the text given."""
    name, sep, raw = text.partition("=")
    if not sep or not name.strip():
        raise typer.BadParameter(f"expected NAME=VALUE, got {text!r}")
    try:
        value: object = json.loads(raw)
    except ValueError:
        value = raw
    return name.strip(), value

"""What the ``lcm`` commands that read or write conversations share."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from sqlalchemy.orm import Session

from lcm.errors import NotFound
from lcm.tenants.repository import TenantRepository

console = Console(stderr=True)  # progress and errors
out = Console()  # results

TenantOpt = Annotated[str, typer.Option("--tenant", help="Tenant name.")]
KeyArg = Annotated[str, typer.Argument(help="Session key.")]
SessionOpt = Annotated[str | None, typer.Option(help="A session id of the family.")]
BudgetOpt = Annotated[int | None, typer.Option(help="Token budget (default from settings).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def tenant_id_for(session: Session, name: str) -> str:
    found = TenantRepository(session).find_by_name(name)
    if found is None:
        raise NotFound(f"no tenant named {name!r} (create it with `lcm tenant create {name}`)")
    return found.id

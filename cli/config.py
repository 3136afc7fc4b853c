"""``lcm config show|get|set``: a tenant's settings, as the tenant itself may change them.

``set`` goes through the same use case as ``PATCH /v1/tenant/settings``: the
value is validated like the process settings, and a limit may be lowered but
not raised above its ceiling (the deployment's value or the operator's grant).
Raising a ceiling is the operator's ``lcm tenant settings NAME key=value``.

Exit codes: 0 ok, 1 not found or refused (unknown setting, invalid value,
above the ceiling), 2 usage.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text
from sqlalchemy.orm import Session

from cli.common import JsonOpt, TenantOpt, in_session, out, setting_assignment, tenant_id_for
from lcm.errors import NotFound
from lcm.settings import get_settings

config_app = typer.Typer(
    help="A tenant's settings (effective values and its overrides). "
    "Exit codes: 0 ok, 1 not found or refused, 2 usage.",
    no_args_is_help=True,
)


def _shown(session: Session, tenant: str) -> dict[str, Any]:
    from lcm.tenants import OVERRIDABLE, effective_settings, stored_overrides

    tenant_id = tenant_id_for(session, tenant)
    effective = effective_settings(session, tenant_id, get_settings())
    return {
        "tenant": tenant,
        "overrides": stored_overrides(session, tenant_id),
        "effective": effective.model_dump(mode="json", include=set(OVERRIDABLE)),
    }


@config_app.command("show")
def config_show(tenant: TenantOpt = "local", as_json: JsonOpt = False) -> None:
    """Every setting a tenant may override: its effective value, and whether the tenant set it."""
    shown = in_session(lambda s: _shown(s, tenant))
    if as_json:
        typer.echo(json.dumps(shown))
        return
    table = Table("setting", "effective", "overridden", title=f"tenant {tenant}")
    for name, value in sorted(shown["effective"].items()):
        table.add_row(name, Text(json.dumps(value)), "yes" if name in shown["overrides"] else "")
    out.print(table)


@config_app.command("get")
def config_get(
    name: Annotated[str, typer.Argument(help="Setting name (see `lcm config show`).")],
    tenant: TenantOpt = "local",
    as_json: JsonOpt = False,
) -> None:
    """One setting's effective value (JSON). Exit 1 if no such setting."""

    def read(session: Session) -> dict[str, Any]:
        shown = _shown(session, tenant)
        if name not in shown["effective"]:
            raise NotFound(f"no tenant setting {name!r} (see `lcm config show`)")
        return {
            "name": name,
            "value": shown["effective"][name],
            "overridden": name in shown["overrides"],
        }

    found = in_session(read)
    typer.echo(json.dumps(found) if as_json else json.dumps(found["value"]))


@config_app.command("set")
def config_set(
    assignment: Annotated[
        str,
        typer.Argument(
            help="NAME=VALUE (VALUE as JSON, or a plain string; null removes the override)."
        ),
    ],
    tenant: TenantOpt = "local",
    as_json: JsonOpt = False,
) -> None:
    """Change one of the tenant's own settings, validated like PATCH /v1/tenant/settings.

    A limit above its ceiling is refused (exit 1); the operator raises a
    ceiling with `lcm tenant settings NAME key=value`.
    """
    from lcm.tenants import update_own_overrides

    name, value = setting_assignment(assignment)

    def work(session: Session) -> dict[str, Any]:
        tenant_id = tenant_id_for(session, tenant)
        # AboveCeiling's message already points at `lcm tenant settings`.
        update_own_overrides(session, tenant_id, {name: value}, get_settings())
        return _shown(session, tenant)

    shown = in_session(work)
    if as_json:
        typer.echo(json.dumps(shown))
        return
    out.print(f"tenant {tenant}: {name} = {json.dumps(shown['effective'][name])}", markup=False)

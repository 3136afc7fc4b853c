"""``lcm tenant …`` and ``lcm key …``: tenants and their API keys, on the database directly."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from typing import Annotated

import typer
from rich.table import Table
from sqlalchemy.orm import Session

from cli.common import JsonOpt, in_session, out, setting_assignment
from lcm.tenants.keys import DEFAULT_SCOPES, IssuedKey, KeyInfo

tenant_app = typer.Typer(help="Tenants.", no_args_is_help=True)
key_app = typer.Typer(
    help="API keys (each with scopes: ingest, read, admin, secrets).", no_args_is_help=True
)

TenantArg = Annotated[str, typer.Argument(help="Tenant name.")]
KeyIdArg = Annotated[int, typer.Argument(help="Key id (from `lcm key list`).")]


@tenant_app.command("create")
def tenant_create(name: TenantArg, as_json: JsonOpt = False) -> None:
    """Create a tenant and print its API key (every scope; shown once, stored only as a hash)."""
    from lcm.tenants.service import create_tenant

    _print_issued(in_session(lambda s: create_tenant(s, name)), as_json)


@tenant_app.command("list")
def tenant_list(as_json: JsonOpt = False) -> None:
    """Every tenant with its id, creation time and number of active keys."""
    from lcm.tenants.service import list_tenants

    tenants = in_session(list_tenants)
    if as_json:
        rows = [{**asdict(t), "created_at": t.created_at.isoformat()} for t in tenants]
        typer.echo(json.dumps(rows))
        return
    table = Table("name", "id", "created", "active keys")
    for tenant in tenants:
        table.add_row(
            tenant.name, tenant.id, f"{tenant.created_at:%Y-%m-%d %H:%M}", str(tenant.active_keys)
        )
    out.print(table)


@tenant_app.command("settings")
def tenant_settings(
    name: TenantArg,
    assignments: Annotated[
        list[str] | None,
        typer.Argument(
            help="setting=value (JSON, or a plain string; null removes the override). "
            "A limit (quota, rate, budget, cap) set here is the tenant's ceiling, "
            "above the deployment's value if need be; each change is logged to lcm.audit."
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Show a tenant's settings, or change them as the operator."""
    from lcm.settings import get_settings
    from lcm.tenants.service import (
        OVERRIDABLE,
        effective_settings,
        stored_overrides,
        tenant_by_name,
        update_overrides,
    )

    changes = dict(setting_assignment(a) for a in assignments or [])
    logging.basicConfig(level=get_settings().log_level)  # the lcm.audit line, on stderr

    def work(session: Session) -> dict[str, object]:
        tenant = tenant_by_name(session, name)
        if changes:
            update_overrides(session, tenant.id, changes)
        effective = effective_settings(session, tenant.id, get_settings())
        return {
            "overrides": stored_overrides(session, tenant.id),
            "effective": effective.model_dump(mode="json", include=set(OVERRIDABLE)),
        }

    shown = in_session(work)
    if as_json:
        typer.echo(json.dumps(shown))
        return
    if changes:
        typer.echo(f"tenant {name}: set {json.dumps(changes, sort_keys=True)}")
    effective = shown["effective"]
    assert isinstance(effective, dict)
    table = Table("setting", "effective")
    for key in sorted(effective):
        table.add_row(key, json.dumps(effective[key]))
    out.print(table)


@key_app.command("create")
def key_create(
    tenant: TenantArg,
    name: Annotated[str, typer.Option(help="What the key is for.")] = "default",
    scope: Annotated[
        list[str] | None,
        typer.Option(
            help="ingest, read, admin or secrets; repeat for several "
            "(default: ingest, read, admin)."
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Issue another API key for an existing tenant (shown once)."""
    from lcm.tenants.keys import issue_key
    from lcm.tenants.service import tenant_by_name

    scopes = scope or list(DEFAULT_SCOPES)
    _print_issued(
        in_session(lambda s: issue_key(s, tenant_by_name(s, tenant), name, scopes)), as_json
    )


@key_app.command("list")
def key_list(tenant: TenantArg, as_json: JsonOpt = False) -> None:
    """The tenant's keys: id, name, prefix, scopes, created, revoked (never the key or its hash)."""
    from lcm.tenants.keys import list_keys
    from lcm.tenants.service import tenant_by_name

    keys = in_session(lambda s: list_keys(s, tenant_by_name(s, tenant).id))
    if as_json:
        typer.echo(json.dumps([_key_json(k) for k in keys]))
        return
    table = Table("id", "name", "prefix", "scopes", "created", "revoked")
    for key in keys:
        revoked = f"{key.revoked_at:%Y-%m-%d %H:%M}" if key.revoked_at else "-"
        table.add_row(
            str(key.id),
            key.name,
            key.prefix,
            ",".join(key.scopes),
            f"{key.created_at:%Y-%m-%d %H:%M}",
            revoked,
        )
    out.print(table)


@key_app.command("revoke")
def key_revoke(tenant: TenantArg, key_id: KeyIdArg) -> None:
    """Revoke a key: refused (401) from its next request on."""
    from lcm.tenants.keys import revoke_key
    from lcm.tenants.service import tenant_by_name

    key = in_session(lambda s: revoke_key(s, tenant_by_name(s, tenant).id, key_id))
    typer.echo(
        f"key {key.id} ({key.name}, {key.prefix}…) revoked at {key.revoked_at:%Y-%m-%d %H:%M:%S}"
    )


@key_app.command("rotate")
def key_rotate(tenant: TenantArg, key_id: KeyIdArg, as_json: JsonOpt = False) -> None:
    """Issue a new key with the same name and scopes and revoke the old one, in one commit."""
    from lcm.tenants.keys import rotate_key
    from lcm.tenants.service import tenant_by_name

    _print_issued(
        in_session(lambda s: rotate_key(s, tenant_by_name(s, tenant).id, key_id)), as_json
    )


def _key_json(key: KeyInfo) -> dict[str, object]:
    return {
        "id": key.id,
        "name": key.name,
        "prefix": key.prefix,
        "scopes": list(key.scopes),
        "created_at": key.created_at.isoformat(),
        "revoked_at": key.revoked_at.isoformat() if key.revoked_at else None,
    }


def _print_issued(issued: IssuedKey, as_json: bool) -> None:
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "tenant_id": issued.tenant_id,
                    "api_key": issued.api_key,
                    "key": _key_json(issued.key),
                }
            )
        )
    else:
        typer.echo(
            f"tenant {issued.tenant_name} ({issued.tenant_id})\n"
            f"key {issued.key.id} ({issued.key.name}; scopes {','.join(issued.key.scopes)})\n"
            f"api key: {issued.api_key}"
        )

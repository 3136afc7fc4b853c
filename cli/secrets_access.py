"""``lcm secrets reads`` and ``lcm secrets erase``: who read originals, and erasing a secret.

Registered into the ``secrets`` command group (:data:`secrets_app`).
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from typing import Annotated

import typer
from rich.table import Table

from cli.common import JsonOpt, TenantOpt, console, open_services, out, tenant_id_for
from cli.secrets_ops import secrets_app as ops_app

# One ``secrets`` group: scan and report (cli.secrets_ops), reads and erase (here).
secrets_app = ops_app


@secrets_app.command("reads")
def reads_command(
    tenant: TenantOpt = "local",
    conversation_id: Annotated[int | None, typer.Option(help="Only this conversation.")] = None,
    key_id: Annotated[int | None, typer.Option(help="Only this key's reads.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many (1 to 200).")] = 50,
    cursor: Annotated[str | None, typer.Option(help="The next_cursor of a page.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Reads that returned originals (with_secrets, --with-secrets), newest first."""
    from lcm.secret_access import list_reads

    with open_services() as services, services.database.read_session() as session:
        page = list_reads(
            session,
            tenant_id_for(session, tenant),
            conversation_id=conversation_id,
            key_id=key_id,
            cursor=cursor,
            limit=limit,
        )
    if as_json:
        rows = {"reads": [asdict(r) for r in page.reads], "next_cursor": page.next_cursor}
        out.print_json(json.dumps(rows, default=str))
        return
    table = Table("id", "read at", "reader", "conversation", "surface", "subject", "spans")
    for r in page.reads:
        reader = r.key_name if r.key_id is None else f"{r.key_name} (key {r.key_id})"
        table.add_row(
            str(r.id),
            f"{r.read_at:%Y-%m-%d %H:%M:%S}",
            reader,
            str(r.conversation_id),
            r.surface,
            r.subject or "-",
            str(r.span_count),
        )
    out.print(table)
    if page.next_cursor:
        console.print(f"more: --cursor {page.next_cursor}")


@secrets_app.command("erase")
def erase_command(
    tenant: TenantOpt = "local",
    span_id: Annotated[
        list[int] | None,
        typer.Option(help="A span id (its value goes everywhere in its conversation); repeat."),
    ] = None,
    value_stdin: Annotated[
        bool,
        typer.Option(
            "--value-stdin",
            help="Read the value from stdin and erase it in every conversation of the tenant.",
        ),
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", help="Really erase (it cannot be undone).")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Replace a secret's original with its placeholder in the stored rows, for good.

    The value is read from stdin, never from the command line (where shell
    history and process lists would keep it).
    """
    from lcm.secret_access import ErasureRequest, erase_secrets
    from lcm.secrets import SecretScan

    if not yes:
        console.print("[red]erasing cannot be undone: add --yes[/red]")
        raise typer.Exit(2)
    value = sys.stdin.read().rstrip("\r\n") if value_stdin else None
    with open_services() as services:
        database = services.database
        with database.read_session() as session:
            tenant_id = tenant_id_for(session, tenant)
        erased = erase_secrets(
            database.transaction,
            tenant_id,
            ErasureRequest(tuple(span_id or ()), value),
            SecretScan.of(services.settings),
            services.storage,
        )
    if as_json:
        out.print_json(json.dumps(asdict(erased)))
        return
    out.print(
        f"erased {erased.spans} spans in {erased.messages} messages, {erased.files} large files "
        f"and {erased.summaries} summaries of conversations {erased.conversation_ids}"
    )

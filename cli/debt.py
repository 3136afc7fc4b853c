"""``lcm debt …``: compaction debt as an operator sees it, and a retry of failed debt."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Annotated

import typer
from rich.table import Table
from sqlalchemy.orm import Session

from cli.common import JsonOpt, console, in_session, out, tenant_id_for
from lcm.compaction.debt_statements import DONE, FAILED, PENDING, RUNNING
from lcm.compaction.service import DebtListing
from lcm.conversations.session_keys import printable_session_key
from lcm.settings import get_settings

debt_app = typer.Typer(help="Compaction debt (one row per conversation).", no_args_is_help=True)
STATUSES = (PENDING, RUNNING, DONE, FAILED)


@debt_app.command("list")
def debt_list(
    status: Annotated[str | None, typer.Option(help="pending, running, done or failed.")] = None,
    tenant: Annotated[str | None, typer.Option("--tenant", help="Tenant name.")] = None,
    limit: Annotated[int, typer.Option(min=1, help="Most rows shown.")] = 100,
    as_json: JsonOpt = False,
) -> None:
    """Debt rows, most recently changed first (``--status failed``: what needs a retry)."""
    from lcm.compaction.service import list_debts

    if status is not None and status not in STATUSES:
        raise typer.BadParameter(f"--status is one of {', '.join(STATUSES)}")

    def read(session: Session) -> list[DebtListing]:
        tenant_id = tenant_id_for(session, tenant) if tenant is not None else None
        return list_debts(session, status, tenant_id, limit)

    rows = in_session(read)
    if as_json:
        typer.echo(json.dumps([asdict(r) for r in rows], default=str))
        return
    table = Table(
        "conversation",
        "tenant",
        "session key",
        "status",
        "reason",
        "attempts",
        "updated",
        "last error",
    )
    for r in rows:
        error = r.last_error.splitlines()[0][:80] if r.last_error else "-"
        table.add_row(
            str(r.conversation_id),
            r.tenant_name,
            printable_session_key(r.session_key),
            r.status,
            r.reason,
            str(r.attempts),
            f"{r.updated_at:%Y-%m-%d %H:%M:%S}",
            error,
        )
    out.print(table)


@debt_app.command("retry")
def debt_retry(
    conversation_ids: Annotated[
        list[int] | None, typer.Argument(help="Conversation ids whose failed debt to retry.")
    ] = None,
    all_failed: Annotated[
        bool, typer.Option("--all-failed", help="Retry every failed debt.")
    ] = False,
) -> None:
    """Set failed debt back to pending (attempts 0) and wake a worker for it."""
    from lcm.compaction.reconcile import retry_failed_debt

    if bool(conversation_ids) == all_failed:
        raise typer.BadParameter("give conversation ids or --all-failed (not both)")
    # Embedded mode's worker lives inside `lcm serve` behind an in-memory
    # broker this process cannot reach: its reconciler wakes the re-armed rows.
    embedded = get_settings().database_url.startswith("sqlite")
    rearmed = in_session(
        lambda s: retry_failed_debt(s, None if all_failed else conversation_ids),
        send_jobs=not embedded,
    )
    skipped = sorted(set(conversation_ids or ()) - set(rearmed))
    if skipped:
        console.print(f"[yellow]not failed, left alone: {', '.join(map(str, skipped))}[/yellow]")
    woken = "lcm serve's reconciler wakes them" if embedded else "wake-ups sent"
    typer.echo(
        f"re-armed {len(rearmed)} debt row(s): {', '.join(map(str, rearmed)) or '-'} ({woken})"
    )
    if conversation_ids and not rearmed:
        raise typer.Exit(1)

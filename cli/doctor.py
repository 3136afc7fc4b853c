"""``lcm doctor``: broken, truncated and degraded summaries, and their repair."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from typing import Annotated

import typer
from rich.table import Table
from sqlalchemy.orm import Session

from cli.common import JsonOpt, in_session, open_services, out, tenant_id_for
from lcm.compaction.inline import run_inline
from lcm.conversations.session_keys import printable_session_key
from lcm.settings import get_settings


def doctor(
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="Tenant name (default: all).")
    ] = None,
    conversation: Annotated[
        int | None, typer.Option("--conversation", help="One conversation id.")
    ] = None,
    apply: Annotated[
        bool, typer.Option("--apply", help="Re-summarize degraded summaries with the LLM.")
    ] = False,
    inline: Annotated[
        bool,
        typer.Option("--inline", help="With --apply: run the repairs in this process, now."),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """List unhealthy summaries per tenant and conversation; ``--apply`` repairs degraded ones.

    ``--apply`` owes a repair job per conversation (leased like compaction)
    and wakes a worker; in embedded mode ``lcm serve``'s reconciler wakes it.
    ``--apply --inline`` runs the jobs here instead (the LLM must be reachable).
    """
    from lcm.doctor.service import diagnose
    from lcm.tenants.repository import TenantRepository

    if inline and not apply:
        raise typer.BadParameter("--inline goes with --apply")

    def tenants(session: Session) -> list[tuple[str, str]]:
        repo = TenantRepository(session)
        ids = [tenant_id_for(session, tenant)] if tenant else repo.all_ids()
        return [(tid, repo.get(tid).name) for tid in ids]  # type: ignore[union-attr]

    def report(session: Session) -> list[dict[str, object]]:
        return [
            {"tenant": name, **asdict(diagnose(session, tid, conversation))}
            for tid, name in tenants(session)
        ]

    found = in_session(report)
    _print(found, as_json)
    if apply:
        _apply(tenants, conversation, inline, as_json)


def _apply(
    tenants: Callable[[Session], list[tuple[str, str]]],
    conversation: int | None,
    inline: bool,
    as_json: bool,
) -> None:
    """Owe the repairs; wake workers for them, or (``--inline``) run them here."""
    from lcm.doctor.service import request_repair

    embedded = get_settings().database_url.startswith("sqlite")

    def owe(session: Session) -> list[int]:
        mode = "inline" if inline else "deferred"
        return [
            cid
            for tid, _ in tenants(session)
            for cid in request_repair(session, tid, conversation, mode=mode)
        ]

    # Embedded mode's worker lives inside `lcm serve` behind an in-memory
    # broker this process cannot reach: its reconciler wakes the owed rows.
    owed = in_session(owe, send_jobs=not inline and not embedded)
    if inline and owed:
        with open_services() as services:
            jobs = services.compaction_jobs("cli")
            ended = {cid: _ended(run_inline(jobs, cid)) for cid in owed}
        typer.echo(json.dumps({"repaired": ended}) if as_json else f"repairs: {ended}")
        if any(status != "done" for status in ended.values()):
            raise typer.Exit(1)
        return
    woken = "lcm serve's reconciler wakes them" if embedded else "wake-ups sent"
    message = f"repair owed for {len(owed)} conversation(s): {owed or '-'} ({woken})"
    typer.echo(json.dumps({"owed": owed}) if as_json else message)


def _ended(report: object) -> str:
    return "busy" if report is None else str(getattr(report, "ended", "?"))


def _print(found: list[dict[str, object]], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(found))
        return
    table = Table("tenant", "conversation", "session key", "broken", "truncated", "degraded")
    for entry in found:
        for c in entry["conversations"]:  # type: ignore[attr-defined]
            table.add_row(
                str(entry["tenant"]),
                str(c["conversation_id"]),
                printable_session_key(str(c["session_key"])),
                str(len(c["broken"])),
                str(len(c["truncated"])),
                str(len(c["degraded"])),
            )
    out.print(table)

"""``lcm doctor``: unhealthy summaries and structural problems, and their repair."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table
from sqlalchemy.orm import Session

from cli.common import JsonOpt, in_session, open_services, out, tenant_id_for
from cli.progress import progress_bar
from lcm.compaction.inline import run_inline
from lcm.compaction.steps import StepAction
from lcm.conversations.session_keys import printable_session_key
from lcm.settings import get_settings

if TYPE_CHECKING:
    from lcm.services import Services


def doctor(
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="Tenant name (default: all).")
    ] = None,
    conversation: Annotated[
        int | None, typer.Option("--conversation", help="One conversation id.")
    ] = None,
    apply: Annotated[
        bool,
        typer.Option(
            "--apply",
            help="Repair structural problems; re-summarize degraded summaries with the LLM.",
        ),
    ] = False,
    inline: Annotated[
        bool,
        typer.Option("--inline", help="With --apply: run the repairs in this process, now."),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """List unhealthy summaries and structural problems per tenant and conversation.

    ``--apply`` repairs structural problems at once (dangling context items
    dropped, counters raised, token counts recomputed; what cannot be
    repaired is listed), then owes a repair job per conversation with
    degraded summaries (leased like compaction)
    and wakes a worker; in embedded mode ``lcm serve``'s reconciler wakes it.
    ``--apply --inline`` runs the jobs here instead (the LLM must be reachable).
    """
    from lcm.doctor.service import diagnose
    from lcm.tenants.service import tenant_names

    if inline and not apply:
        raise typer.BadParameter("--inline goes with --apply")

    def tenants(session: Session) -> list[tuple[str, str]]:
        if tenant:
            return [(tenant_id_for(session, tenant), tenant)]
        return tenant_names(session)

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
    """Repair structure; owe the LLM repairs and wake workers, or (``--inline``) run them here."""
    from lcm.doctor.service import request_repair
    from lcm.doctor.structure import repair_structure

    embedded = get_settings().database_url.startswith("sqlite")
    structural: list[dict[str, object]] = []

    def owe(session: Session) -> list[int]:
        mode = "inline" if inline else "deferred"
        owed = []
        for tid, _ in tenants(session):
            structural.extend(asdict(r) for r in repair_structure(session, tid, conversation))
            owed += request_repair(session, tid, conversation, mode=mode)
        return owed

    # Embedded mode's worker lives inside `lcm serve` behind an in-memory
    # broker this process cannot reach: its reconciler wakes the owed rows.
    owed = in_session(owe, send_jobs=not inline and not embedded)
    if structural and not as_json:
        typer.echo(f"structural repairs: {structural}")
    if inline and owed:
        with open_services() as services:
            ended = _repair_inline(services, owed, as_json)
        done = {"repaired": ended, "structural": structural}
        typer.echo(json.dumps(done) if as_json else f"repairs: {ended}")
        if any(status != StepAction.DONE for status in ended.values()):
            raise typer.Exit(1)
        return
    woken = "lcm serve's reconciler wakes them" if embedded else "wake-ups sent"
    message = f"repair owed for {len(owed)} conversation(s): {owed or '-'} ({woken})"
    typer.echo(json.dumps({"owed": owed, "structural": structural}) if as_json else message)


def _repair_inline(services: Services, owed: list[int], as_json: bool) -> dict[int, str]:
    """Run each owed repair chain here, a bar over the conversations on a terminal."""
    jobs = services.compaction_jobs("cli")
    ended: dict[int, str] = {}
    with progress_bar("repairing conversations", quiet=as_json) as on_progress:
        on_progress(0, len(owed))
        for done, cid in enumerate(owed, 1):
            ended[cid] = _ended(run_inline(jobs, cid))
            on_progress(done, len(owed))
    return ended


def _ended(report: object) -> str:
    return "busy" if report is None else str(getattr(report, "ended", "?"))


def _print(found: list[dict[str, object]], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(found))
        return
    table = Table(
        "tenant",
        "conversation",
        "session key",
        "broken",
        "truncated",
        "degraded",
        "dangling items",
        "counters behind",
        "miscounted",
    )
    for entry in found:
        for c in entry["conversations"]:  # type: ignore[attr-defined]
            table.add_row(
                str(entry["tenant"]),
                str(c["conversation_id"]),
                printable_session_key(str(c["session_key"])),
                str(len(c["broken"])),
                str(len(c["truncated"])),
                str(len(c["degraded"])),
                str(len(c["dangling_items"])),
                ", ".join(c["counters_behind"]) or "0",
                str(len(c["miscounted"])),
            )
    out.print(table)

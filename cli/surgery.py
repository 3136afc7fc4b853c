"""``lcm summary rewrite|dissolve|operation``: an operator's summary surgery.

Each command stores an operation and owes it as the conversation's
compaction debt, so it runs as a leased pass of the conversation's chain
(never beside a sweep or a doctor repair of it). By default a worker runs
it (on Postgres a wake-up is sent; embedded, ``lcm serve``'s reconciler
wakes it) and the command prints the pending operation; ``--wait`` waits
for it; ``--inline`` runs the chain in this process (the LLM must be
reachable from here).

Exit codes: 0 done (or accepted, without --wait); 1 not found, refused, or
the operation failed; 2 usage; 3 still pending when --wait ran out (or, with
--inline, a worker holds the lease: it runs the operation).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated

import typer
from sqlalchemy.orm import Session

from cli.common import JsonOpt, TenantOpt, in_session, open_services, tenant_id_for
from lcm.settings import get_settings

if TYPE_CHECKING:
    from lcm.surgery import OperationView, SurgeryAsk

EXIT_CODES = (
    "Exit codes: 0 done (or accepted), 1 not found, refused or failed, 2 usage, 3 still pending."
)
SummaryArg = Annotated[str, typer.Argument(help="Summary id (sum_…).")]
InlineOpt = Annotated[
    bool, typer.Option("--inline", help="Run it in this process, now (the LLM must answer here).")
]
WaitOpt = Annotated[
    float, typer.Option("--wait", min=0, help="Seconds to wait for a worker to run it.")
]


def summary_rewrite(
    summary_id: SummaryArg,
    subtree: Annotated[
        bool, typer.Option("--subtree", help="Also every summary below it, bottom-up.")
    ] = False,
    instructions: Annotated[
        str | None,
        typer.Option("--instructions", help="Added to the summarizer's prompt (≤ 4000 chars)."),
    ] = None,
    tenant: TenantOpt = "local",
    inline: InlineOpt = False,
    wait: WaitOpt = 0.0,
    as_json: JsonOpt = False,
) -> None:
    """Rewrite a summary with the LLM, in place: its id, sources and references stay.

    Exit codes: 0 done (or accepted), 1 not found, refused or failed, 2 usage, 3 still pending.
    """
    from lcm.surgery import MAX_INSTRUCTIONS_CHARS, SurgeryAsk

    if instructions is not None and len(instructions) > MAX_INSTRUCTIONS_CHARS:
        raise typer.BadParameter(f"--instructions is over {MAX_INSTRUCTIONS_CHARS} characters")
    ask = SurgeryAsk(summary_id, "rewrite", subtree, instructions)
    _operate(ask, tenant, inline, wait, as_json)


def summary_dissolve(
    summary_id: SummaryArg,
    tenant: TenantOpt = "local",
    inline: InlineOpt = False,
    wait: WaitOpt = 0.0,
    as_json: JsonOpt = False,
) -> None:
    """Replace a condensed summary in the context by the summaries it was condensed from.

    The summary stays stored (whatever references it still resolves). A leaf,
    or a summary the context does not show, is refused. Exit codes: 0 done
    (or accepted), 1 not found, refused or failed, 2 usage, 3 still pending.
    """
    from lcm.surgery import SurgeryAsk

    _operate(SurgeryAsk(summary_id, "dissolve"), tenant, inline, wait, as_json)


def summary_operation(
    operation_id: Annotated[str, typer.Argument(help="Operation id (op_…).")],
    wait: WaitOpt = 0.0,
    as_json: JsonOpt = False,
) -> None:
    """A surgery operation as it is now. Exit codes: 0 done, 1 not found or failed, 3 pending."""
    _finish(_poll(operation_id, wait), as_json, awaited=wait > 0)


def _operate(ask: SurgeryAsk, tenant: str, inline: bool, wait: float, as_json: bool) -> None:
    from lcm.compaction import run_inline
    from lcm.surgery import get_operation, request_surgery

    embedded = get_settings().database_url.startswith("sqlite")

    def ask_for(session: Session) -> OperationView:
        mode = "inline" if inline else "deferred"
        operation_id = request_surgery(session, tenant_id_for(session, tenant), ask, mode=mode)
        return get_operation(session, None, operation_id)

    # Embedded mode's worker lives inside `lcm serve` behind an in-memory
    # broker this process cannot reach: its reconciler wakes the owed debt.
    found = in_session(ask_for, send_jobs=not inline and not embedded)
    if inline:
        with open_services() as services:
            run_inline(services.compaction_jobs("cli"), found.conversation_id)
    _finish(_poll(found.operation_id, wait), as_json, awaited=inline or wait > 0)


def _poll(operation_id: str, wait: float) -> OperationView:
    """The operation, re-read until it is no longer pending or ``wait`` seconds passed."""
    from lcm.surgery import get_operation

    deadline = time.monotonic() + wait
    while True:
        found = in_session(lambda s: get_operation(s, None, operation_id))
        if found.status != "pending" or time.monotonic() >= deadline:
            return found
        time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))


def _finish(found: OperationView, as_json: bool, *, awaited: bool = True) -> None:
    """Print the operation; exit 1 if it failed, 3 if ``awaited`` and still pending."""
    shown = asdict(found)
    for name in ("created_at", "finished_at"):
        shown[name] = shown[name].isoformat() if shown[name] else None
    if as_json:
        typer.echo(json.dumps(shown))
    else:
        done = f" {found.done}/{len(found.targets)}" if found.action == "rewrite" else ""
        error = f": {found.error}" if found.error else ""
        line = f"{found.operation_id} {found.action} {found.summary_id} {found.status}"
        typer.echo(line + done + error)
    if found.status == "failed":
        raise typer.Exit(1)
    if found.status == "pending" and awaited:
        raise typer.Exit(3)

"""``lcm doctor-clean``: junk conversations (cron, heartbeat, subagents) listed, then erased.

Exit codes: 0 done (or nothing to do), 1 refused (an unknown tenant, or a
conversation the erase refused: its row says why), 2 usage.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from cli.common import JsonOpt, console, open_services, out, tenant_id_for
from lcm.conversations.session_keys import printable_session_key

if TYPE_CHECKING:
    from lcm.erasure.junk import CleanOutcome, JunkConversation, JunkCriteria


TenantsOpt = Annotated[str | None, typer.Option("--tenant", help="Tenant name (default: all).")]
PatternOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--pattern",
        help="Session-key glob (repeatable; '**' matches any key). "
        "Default: OpenClaw's cron, heartbeat and subagent keys.",
    ),
]
InactiveOpt = Annotated[
    int | None,
    typer.Option("--inactive-days", min=0, help="Only those with no message for N days."),
]
ApplyOpt = Annotated[
    bool, typer.Option("--apply", help="Erase the conversations listed (nothing is kept).")
]
ArchiveOpt = Annotated[
    bool, typer.Option("--archive", help="Mark them archived instead of erasing them.")
]


def doctor_clean(
    tenant: TenantsOpt = None,
    pattern: PatternOpt = None,
    inactive_days: InactiveOpt = None,
    apply: ApplyOpt = False,
    archive: ArchiveOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """List junk conversations: a session key matching a pattern, and idle if --inactive-days.

    Read-only unless ``--apply`` (erase) or ``--archive`` is given; each
    conversation then goes in its own transaction, and one the erase refuses
    (a later session or a fork uses its summaries) is reported on its row.
    Exit codes: 0 done, 1 refused (an unknown tenant, a refused row), 2 usage.
    """
    from lcm.erasure.junk import DEFAULT_JUNK_PATTERNS, JunkCriteria

    if apply and archive:
        raise typer.BadParameter("--apply erases, --archive archives: pick one")
    criteria = JunkCriteria(tuple(pattern or DEFAULT_JUNK_PATTERNS), inactive_days)
    junk, outcomes = _find_and_clean(tenant, criteria, apply or archive, archive)
    rows = [_row(j, outcomes.get(j.conversation_id)) for j in junk]
    if as_json:
        typer.echo(json.dumps(rows))
    else:
        _print(rows, apply or archive)
    if any(o.status == "refused" for o in outcomes.values()):
        raise typer.Exit(1)


def _find_and_clean(
    tenant: str | None, criteria: JunkCriteria, clean: bool, archive: bool
) -> tuple[list[JunkConversation], dict[int, CleanOutcome]]:
    """The junk of one tenant or all; erased or archived when ``clean`` (outcomes by id)."""
    from lcm.erasure.junk import clean_junk, find_junk
    from lcm.tenants.service import tenant_names

    now = datetime.now(UTC)
    with open_services() as services:
        database = services.database
        with database.read_session() as session:
            tenants = (
                [(tenant_id_for(session, tenant), tenant)] if tenant else tenant_names(session)
            )
            junk = find_junk(session, tenants, criteria, now)
        if not clean:
            return junk, {}
        done = clean_junk(
            database.transaction,
            database.read_session,
            services.storage,
            junk,
            criteria,
            now,
            archive=archive,
        )
    return junk, {o.conversation_id: o for o in done}


def _row(junk: JunkConversation, outcome: CleanOutcome | None) -> dict[str, object]:
    row: dict[str, object] = {
        "tenant": junk.tenant,
        "session_key": printable_session_key(junk.session_key),
        "conversation_id": junk.conversation_id,
        "messages": junk.messages,
        "last_activity": junk.last_activity.isoformat(),
        "archived": junk.archived,
        "reasons": junk.reasons,
    }
    if outcome is not None:
        row.update(status=outcome.status, detail=outcome.detail)
    return row


def _print(rows: list[dict[str, object]], applied: bool) -> None:
    columns = ["tenant", "conversation", "session key", "messages", "last activity", "why"]
    table = Table(*columns, *(["outcome"] if applied else []))
    for r in rows:
        cells = [
            str(r["tenant"]),
            str(r["conversation_id"]),
            str(r["session_key"]),
            str(r["messages"]),
            str(r["last_activity"])[:16].replace("T", " "),
            "; ".join(r["reasons"]),  # type: ignore[arg-type]
        ]
        if applied:
            cells.append(f"{r.get('status', '-')} {r.get('detail', '')}".strip())
        table.add_row(*cells)
    out.print(table)
    verb = "handled" if applied else "found (read-only: --apply erases, --archive archives)"
    console.print(f"{len(rows)} junk conversation(s) {verb}")

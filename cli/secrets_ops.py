"""``lcm secrets scan`` and ``lcm secrets report``: operator controls of secret detection.

``scan`` records a scan (``lcm.secrets.scans``) and follows it with a bar
until it ends. On Postgres the workers run it (the job goes to the broker);
on SQLite, whose worker lives inside ``lcm serve`` behind an in-memory
broker this process cannot reach, or with ``--inline``, this process runs
the job's slices itself, under the same lease, so a worker taking it at the
same time is harmless.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import asdict
from typing import Annotated

import typer
from rich.table import Table
from sqlalchemy.orm import Session

from cli.common import JsonOpt, TenantOpt, in_session, out, tenant_id_for
from cli.progress import progress_bar
from lcm.db.engine import Database
from lcm.secrets import ScanProgress
from lcm.settings import get_settings

secrets_app = typer.Typer(
    help=(
        "Detected secrets: scans, reports, reads of originals, erasure."
        " Exit codes: 0 ok, 1 not found, refused or failed, 2 usage."
    ),
    no_args_is_help=True,
)

ConversationOpt = Annotated[
    int | None, typer.Option("--conversation", min=1, help="One conversation (its id).")
]
POLL_SECONDS = 0.5


@secrets_app.command("scan")
def scan_command(
    tenant: TenantOpt = "local",
    conversation: ConversationOpt = None,
    rescan_all: Annotated[
        bool, typer.Option("--all", help="Every conversation, not only stale ones.")
    ] = False,
    follow: Annotated[
        int | None, typer.Option("--id", min=1, help="Follow this scan instead of starting one.")
    ] = None,
    inline: Annotated[bool, typer.Option(help="Run the scan in this process.")] = False,
    wait: Annotated[bool, typer.Option(help="Wait for the scan to end.")] = True,
    as_json: JsonOpt = False,
) -> None:
    """Re-scan stored messages with the current detector and the tenant's rules.

    Only conversations never scanned, or scanned by another detector version
    or other rules, unless --all. One scan per scope at a time.
    """
    from lcm.secrets import scan_progress, start_scan
    from lcm.tenants import effective_settings

    settings = get_settings()
    here = inline or settings.is_sqlite

    def begin(session: Session) -> ScanProgress:
        tid = tenant_id_for(session, tenant)
        if follow is not None:
            return scan_progress(session, tid, follow)
        effective = effective_settings(session, tid, settings)
        return start_scan(session, tid, effective, conversation, rescan_all)

    progress = in_session(begin, send_jobs=not here)
    if wait:
        progress = _follow(tenant, progress, here, as_json)
    typer.echo(json.dumps(asdict(progress), default=str) if as_json else _line(progress))
    if progress.status == "failed":
        raise typer.Exit(1)


def _follow(tenant: str, progress: ScanProgress, here: bool, as_json: bool) -> ScanProgress:
    """Run (``here``) or watch the scan until it ends, a bar over its messages."""
    from lcm.secrets import run_scan_job, scan_progress

    settings = get_settings()
    database = Database(settings)
    owner = f"cli-{uuid.uuid4().hex[:16]}"
    try:
        with progress_bar(f"scanning secrets (scan {progress.id})", quiet=as_json) as bar:
            while progress.status in ("pending", "running"):
                bar(progress.messages_done, progress.messages_total)
                if (
                    not here
                    or run_scan_job(database.transaction, progress.id, owner, settings) is None
                ):
                    time.sleep(POLL_SECONDS)  # a worker holds it: watch
                with database.read_session() as session:
                    tid = tenant_id_for(session, tenant)
                    progress = scan_progress(session, tid, progress.id)
            bar(progress.messages_done, progress.messages_total)
    finally:
        database.dispose()
    return progress


def _line(p: ScanProgress) -> str:
    return (
        f"scan {p.id}: {p.status}; {p.messages_done}/{p.messages_total} messages, "
        f"{p.conversations_done} conversation(s), {p.spans_written} span(s) written "
        f"(detector {p.detector_version})" + (f"; error: {p.last_error}" if p.last_error else "")
    )


@secrets_app.command("report")
def report_command(
    tenant: TenantOpt = "local", conversation: ConversationOpt = None, as_json: JsonOpt = False
) -> None:
    """Findings by kind for each conversation of the tenant that has any."""
    from lcm.secrets import ConversationFindings, secrets_report

    def read(session: Session) -> list[ConversationFindings]:
        return secrets_report(session, tenant_id_for(session, tenant), conversation)

    found = in_session(read)
    if as_json:
        rows = [{**asdict(c), "spans": c.spans} for c in found]
        typer.echo(json.dumps({"conversations": rows}))
        return
    if not found:
        typer.echo("no findings")
        return
    table = Table("conversation", "session key", "kind", "findings", "values")
    for c in found:
        for k in c.kinds:
            key = c.session_key or ""
            table.add_row(str(c.conversation_id), key, k.kind, str(k.spans), str(k.values))
    out.print(table)

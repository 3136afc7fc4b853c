"""``lcm import``: gateway transcripts into the database, with progress bars.

Works on the database directly (like ``lcm tenant create``), so it needs no
running API: it runs the same bootstrap as ``POST …/bootstrap``, and
``--compact`` the same compaction passes a worker runs, in-process. Progress
bars go to stderr on a terminal (not with ``--json``), results to stdout.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, cast

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn
from rich.table import Table
from rich.text import Text

from cli import conversations, import_preview
from cli.common import (
    BudgetOpt,
    JsonOpt,
    TenantOpt,
    open_services,
    out,
    session_key,
    tenant_id_for,
)
from cli.progress import new_progress
from lcm.compaction.inline import compact_now
from lcm.context import context_tokens
from lcm.errors import LcmError
from lcm.services import Services
from lcm.transcripts.model import FORMATS, FormatChoice


class _Rate(ProgressColumn):
    """Messages per second of a message task (rich's own speed columns speak bytes)."""

    def render(self, task: Task) -> Text:
        if not task.fields.get("messages"):
            return Text("")
        return Text(f"{task.speed or 0:>7,.0f} msg/s", style="progress.data.speed")


@dataclass(frozen=True, slots=True)
class FileReport:
    file: str
    key: str
    conversation_id: int
    format: str
    messages: int
    imported: int
    tool_pairs: int
    seconds: float
    context_tokens_before: int
    context_tokens_after: int
    passes: int


def register(app: typer.Typer) -> None:
    """``lcm import`` here; ``lcm status`` and ``lcm dag`` from :mod:`cli.conversations`."""
    app.command("import")(import_command)
    app.command("status")(conversations.status_command)
    app.command("dag")(conversations.dag_command)


def import_command(
    paths: Annotated[list[Path], typer.Argument(help="JSONL files or directories of them.")],
    transcript_format: Annotated[
        str, typer.Option("--format", help="auto, openclaw or claude-code.")
    ] = "auto",
    compact: Annotated[bool, typer.Option(help="Run a compaction sweep after each file.")] = False,
    tenant: TenantOpt = "local",
    key: Annotated[str | None, typer.Option(help="Session key (default: file name).")] = None,
    token_budget: BudgetOpt = None,
    as_json: JsonOpt = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Report what would be imported; write nothing.")
    ] = False,
    since: Annotated[
        datetime | None,
        typer.Option(help="Only transcripts with a message at or after this time (UTC)."),
    ] = None,
    limit: Annotated[
        int | None, typer.Option(min=1, help="At most this many transcripts, the most recent.")
    ] = None,
) -> None:
    """Import gateway transcripts (OpenClaw/pi JSONL v1-3, Claude Code JSONL)."""
    if transcript_format != "auto" and transcript_format not in FORMATS:
        raise typer.BadParameter("--format is auto, openclaw or claude-code")
    fmt = cast(FormatChoice, transcript_format)
    files = import_preview.select_transcripts(_transcript_files(paths), fmt, since, limit)
    # Every file's key is checked before the first import: a file name can hold
    # what a session key may not.
    keys = [session_key(key or path.stem) for path in files]
    with open_services() as services:
        if dry_run:
            import_preview.dry_run(services, files, keys, fmt, tenant, as_json)
            return
        reports = _import_all(services, files, fmt, compact, tenant, keys, token_budget, as_json)
    if as_json:
        for report in reports:
            out.print_json(json.dumps(asdict(report)))
    else:
        out.print(_report_table(reports))


def _import_all(
    services: Services,
    files: list[Path],
    transcript_format: FormatChoice,
    compact: bool,
    tenant: str,
    keys: list[str],
    token_budget: int | None,
    as_json: bool,
) -> list[FileReport]:
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), _Rate())
    # Bars on a terminal only, and not under --json (cli/progress.py).
    with new_progress(*columns, quiet=as_json) as progress:
        importer = _Importer(services, transcript_format, tenant, progress)
        files_task = progress.add_task("files", total=len(files))
        reports = []
        for path, key in zip(files, keys, strict=True):
            reports.append(importer.run(path, key, compact, token_budget))
            progress.advance(files_task)
    return reports


class _Importer:
    """One tenant's import: bootstrap each file, summarize its large files, maybe compact."""

    def __init__(
        self,
        services: Services,
        transcript_format: FormatChoice,
        tenant: str,
        progress: Progress,
    ) -> None:
        from lcm.tenants.service import effective_settings
        from lcm.transcripts.service import BootstrapOptions

        database = self.database = services.database
        self.progress = progress
        with database.session() as session:
            self.tenant_id = tenant_id_for(session, tenant)
            self.settings = effective_settings(session, self.tenant_id, services.settings)
        self.options = BootstrapOptions.from_settings(
            self.settings, services.storage, transcript_format
        )
        self.summarizer = services.summarizer
        self.storage = services.storage
        self.jobs = services.compaction_jobs("cli")

    def run(self, path: Path, key: str, compact: bool, token_budget: int | None) -> FileReport:
        from lcm.files.service import summarize_file
        from lcm.retrieval.search_backlog import index_search_backlog
        from lcm.transcripts.importer import import_transcript
        from lcm.transcripts.parse import parse_transcript
        from lcm.transcripts.service import BootstrapResult, tool_pairs

        data = path.read_bytes()
        total = len(parse_transcript(data, self.options.transcript_format).messages)
        task = self.progress.add_task(f"  {path.name}", total=total, messages=True)

        def advance(result: BootstrapResult) -> None:
            self.progress.advance(task, result.transcript_messages)

        outcome = import_transcript(
            self.database.transaction, self.tenant_id, key, data, self.options, on_chunk=advance
        )
        # No worker here: this command does the work it would (SQLite search indexing
        # after the chunks committed, large-file summaries).
        index_search_backlog(self.database.transaction)
        for file_id in outcome.file_ids:
            summarize_file(
                self.database.transaction,
                self.storage,
                self.summarizer,
                file_id,
                self.settings,
            )
        before = after = context_tokens(self.jobs.engine.load(outcome.conversation_id))
        passes = 0
        if compact:
            budget = token_budget or self.settings.default_token_budget
            after, passes = self._compact(outcome.conversation_id, before, budget)
        with self.database.session() as session:
            pairs = tool_pairs(session, outcome.conversation_id)
        return FileReport(
            file=str(path),
            key=key,
            conversation_id=outcome.conversation_id,
            format=outcome.format,
            messages=outcome.transcript_messages,
            imported=outcome.imported,
            tool_pairs=pairs,
            seconds=round(outcome.seconds, 3),
            context_tokens_before=before,
            context_tokens_after=after,
            passes=passes,
        )

    def _compact(self, conversation_id: int, before: int, budget: int) -> tuple[int, int]:
        """The same chain of passes a worker runs, run here (the debt row leases it)."""
        from lcm.compaction.engine import PassOutcome

        task = self.progress.add_task(f"  compaction passes ({before:,} tokens)", total=None)

        def advance(outcome: PassOutcome) -> None:
            self.progress.update(
                task,
                advance=1,
                description=f"  {outcome.kind} pass: {outcome.tokens_in:,} -> "
                f"{outcome.tokens_out:,} tokens",
            )

        done = compact_now(self.jobs, self.tenant_id, conversation_id, budget, on_pass=advance)
        if done is None:
            raise LcmError("a worker is compacting this conversation; try again when it is done")
        return done.tokens_after, len(done.passes)


def _transcript_files(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += sorted(p for p in path.rglob("*.jsonl") if p.is_file())
        elif path.is_file():
            files.append(path)
        else:
            raise typer.BadParameter(f"{path} is neither a file nor a directory")
    return files


def _report_table(reports: list[FileReport]) -> Table:
    table = Table(title="lcm import")
    numeric = ("messages", "imported", "tool pairs", "seconds", "msg/s", "context tokens", "passes")
    for column in ("file", "format"):
        table.add_column(column)
    for column in numeric:
        table.add_column(column, justify="right")
    for r in reports:
        rate = r.imported / r.seconds if r.seconds else 0.0
        tokens = f"{r.context_tokens_before:,}"
        if r.passes:
            tokens += f" -> {r.context_tokens_after:,}"
        cells = (f"{r.messages:,}", f"{r.imported:,}", f"{r.tool_pairs:,}", f"{r.seconds:.2f}")
        table.add_row(Path(r.file).name, r.format, *cells, f"{rate:,.0f}", tokens, str(r.passes))
    return table

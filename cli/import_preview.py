"""``lcm import --since/--limit`` (which transcripts) and ``--dry-run`` (what each would do)."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

from rich.table import Table

from cli.common import out, tenant_id_for
from lcm.services import Services
from lcm.transcripts.model import FormatChoice


def select_transcripts(
    files: list[Path], transcript_format: FormatChoice, since: datetime | None, limit: int | None
) -> list[Path]:
    """``files`` with a message at or after ``since``, at most the ``limit`` most recent.

    A transcript's time is its newest message's, else the file's modification
    time. The files chosen keep their given order.
    """
    if since is None and limit is None:
        return files
    from lcm.transcripts.preview import newest_time

    def when(path: Path) -> datetime:
        found = newest_time(path.read_bytes(), transcript_format)
        return found or datetime.fromtimestamp(path.stat().st_mtime, UTC)

    times = {path: when(path) for path in files}
    floor = since if since is None or since.tzinfo else since.replace(tzinfo=UTC)
    chosen = [p for p in files if floor is None or times[p] >= floor]
    if limit is not None:
        newest = set(sorted(chosen, key=times.__getitem__, reverse=True)[:limit])
        chosen = [p for p in chosen if p in newest]
    return chosen


def dry_run(
    services: Services,
    files: list[Path],
    keys: list[str],
    transcript_format: FormatChoice,
    tenant: str,
    as_json: bool,
) -> None:
    """Print what importing each file would do; write nothing."""
    from lcm.tenants.service import effective_settings
    from lcm.transcripts.preview import preview_transcript
    from lcm.transcripts.service import BootstrapOptions

    database = services.database
    with database.read_session() as session:
        tenant_id = tenant_id_for(session, tenant)
        settings = effective_settings(session, tenant_id, services.settings)
    options = BootstrapOptions.from_settings(settings, services.storage, transcript_format)
    table = Table(title="lcm import --dry-run (nothing written)")
    for column in ("file", "key", "format", "anchor", "newest message"):
        table.add_column(column)
    for column in ("messages", "would import", "files"):
        table.add_column(column, justify="right")
    totals = [0, 0, 0]
    for path, key in zip(files, keys, strict=True):
        seen = preview_transcript(database.read_session, tenant_id, key, path.read_bytes(), options)
        if as_json:
            row = {"file": str(path), "key": key, **asdict(seen)}
            out.print_json(json.dumps(row, default=str))
        newest = seen.last_at.isoformat(timespec="seconds") if seen.last_at else "-"
        counts = (seen.messages, seen.would_import, seen.large_files)
        table.add_row(path.name, key, seen.format, seen.anchor, newest, *map(str, counts))
        totals = [a + b for a, b in zip(totals, counts, strict=True)]
    if not as_json:
        table.add_row(f"{len(files)} transcripts", "", "", "", "", *map(str, totals))
        out.print(table)

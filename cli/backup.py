"""``lcm backup`` and ``lcm restore``: an embedded home while it runs; Postgres by its tools."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from sqlalchemy.engine import make_url

from cli.common import JsonOpt, console, out
from lcm.backup import backup_home, postgres_commands, restore_home
from lcm.errors import LcmError
from lcm.files.storage import files_root
from lcm.settings import Settings, get_settings

PathArg = Annotated[Path, typer.Argument(help="The backup directory.")]


def backup(destination: PathArg, as_json: JsonOpt = False) -> None:
    """Back up the database (SQLite: consistent while `lcm serve` writes) and its files.

    On Postgres, prints the pg_dump / pg_restore commands for the configured
    database instead. Exit codes: 0 done, 1 refused (the destination exists,
    no database), 2 usage.
    """
    settings = get_settings()
    if not settings.is_sqlite:
        _print_postgres(settings, destination)
        return
    try:
        report = backup_home(_sqlite_path(settings), files_root(settings), destination)
    except LcmError as exc:
        console.print(f"[red]{exc.message}[/red]")
        raise typer.Exit(1) from exc
    if as_json:
        out.print_json(json.dumps(asdict(report)))
        return
    out.print(
        f"backup written to {destination}: {report.messages} messages, {report.summaries} "
        f"summaries in {report.conversations} conversations of {report.tenants} tenants; "
        f"{report.files_copied} files"
    )
    if report.files_missing:
        console.print(
            f"[yellow]{len(report.files_missing)} files the copy names were erased before they "
            "could be copied (listed in manifest.json)[/yellow]"
        )


def restore(
    source: PathArg,
    force: Annotated[
        bool, typer.Option("--force", help="Replace a database that holds tenants.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Restore a backup made by `lcm backup` into the configured home.

    Refuses (exit 1) to replace a database holding any tenant without
    --force. Run `lcm db upgrade` afterwards if the backup is older than
    this version (`lcm serve` does it when it starts).
    """
    settings = get_settings()
    if not settings.is_sqlite:
        _print_postgres(settings, source)
        return
    try:
        report = restore_home(source, _sqlite_path(settings), files_root(settings), force=force)
    except LcmError as exc:
        console.print(f"[red]{exc.message}[/red]")
        raise typer.Exit(1) from exc
    if as_json:
        out.print_json(json.dumps(asdict(report)))
        return
    verb = "replaced" if report.replaced else "restored"
    out.print(
        f"{verb} {report.database}: {report.messages} messages, {report.summaries} summaries; "
        f"{report.files_copied} files copied"
    )


def _sqlite_path(settings: Settings) -> Path:
    database = make_url(settings.database_url).database
    if not database or database == ":memory:":
        raise typer.BadParameter("the configured SQLite database is not a file")
    return Path(database)


def _print_postgres(settings: Settings, path: Path) -> None:
    console.print(
        "The database is Postgres: back it up and restore it with its own tools "
        "(the password comes from PGPASSWORD or ~/.pgpass):"
    )
    for command in postgres_commands(settings.database_url, str(path)):
        out.print(command, highlight=False, soft_wrap=True)
    console.print(f"File contents live in {files_root(settings)}: copy that directory too.")

"""Back up an embedded home while ``lcm serve`` writes to it, and restore one.

A backup is a directory: ``lcm.db``, a copy of the database made through
SQLite's online backup API in one step, and ``files/``, the stored file
contents that copy references.

One step, not page by page: a stepped backup starts over whenever another
connection writes between two steps, so under a steady write load it may
never finish. A single step reads every page inside one read transaction;
in WAL mode that transaction sees one commit's state and blocks no writer
(they append to the WAL meanwhile), so the copy is consistent and the
service keeps answering. File contents are content-addressed and never
rewritten, so those the copy references are copied after it; one erased
in between is missing from the backup and listed as such (the erasure
happened after the copy's moment, but the copy still names the file).

A restore copies the backup's database into the configured one through the
same API (so a database file other connections have open is replaced as one
write transaction, never half-written) and its files into the files
directory. It refuses to replace a database that holds any tenant unless
forced: that is someone's live data.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy.engine import URL, make_url

from lcm.errors import Conflict, InvalidInput
from lcm.files.storage import LOCAL_SCHEME

DATABASE_FILE = "lcm.db"
FILES_DIR = "files"
MANIFEST = "manifest.json"


@dataclass(frozen=True, slots=True)
class BackupReport:
    created_at: str
    database_bytes: int
    tenants: int
    conversations: int
    messages: int
    summaries: int
    files_copied: int
    files_missing: list[str]


@dataclass(frozen=True, slots=True)
class RestoreReport:
    database: str
    messages: int
    summaries: int
    files_copied: int
    replaced: bool


def backup_home(database_path: Path, files_root: Path, destination: Path) -> BackupReport:
    """Write a backup of ``database_path`` (and the files it references) to ``destination``.

    ``destination`` must not exist; the backup is built beside it and renamed
    into place only once complete, so a crash leaves no half backup under
    that name.
    """
    if destination.exists():
        raise Conflict(f"{destination} exists; a backup goes to a new path")
    if not database_path.is_file():
        raise InvalidInput(f"no database at {database_path}")
    partial = destination.with_name(destination.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        copy = partial / DATABASE_FILE
        _copy_database(database_path, copy)
        counts = _counts(copy)
        copied, missing = _copy_files(_local_files(copy), files_root, partial / FILES_DIR)
        report = BackupReport(
            created_at=datetime.now(UTC).isoformat(timespec="seconds"),
            database_bytes=copy.stat().st_size,
            files_copied=copied,
            files_missing=missing,
            **counts,
        )
        (partial / MANIFEST).write_text(json.dumps(asdict(report), indent=2) + "\n")
        partial.rename(destination)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return report


def restore_home(
    source: Path, database_path: Path, files_root: Path, *, force: bool
) -> RestoreReport:
    """Restore the backup at ``source`` into ``database_path`` and ``files_root``."""
    backup = source / DATABASE_FILE
    if not (source / MANIFEST).is_file() or not backup.is_file():
        raise InvalidInput(f"{source} is not a backup made by `lcm backup`")
    _check_integrity(backup)
    replaced = database_path.exists() and _holds_tenants(database_path)
    if replaced and not force:
        raise Conflict(f"{database_path} holds tenants; restoring would replace them (use --force)")
    copied, _missing = _copy_files(_local_files(backup), source / FILES_DIR, files_root)
    database_path.parent.mkdir(parents=True, exist_ok=True)
    _copy_database(backup, database_path)
    counts = _counts(database_path)
    return RestoreReport(
        database=str(database_path),
        messages=counts["messages"],
        summaries=counts["summaries"],
        files_copied=copied,
        replaced=replaced,
    )


def postgres_commands(database_url: str, destination: str) -> list[str]:
    """The pg_dump and pg_restore commands for ``database_url`` (its password left out)."""
    given = make_url(database_url)
    url = URL.create(
        "postgresql",
        username=given.username,
        host=given.host,
        port=given.port,
        database=given.database,
        query=given.query,
    )
    target = url.render_as_string()
    return [
        f'pg_dump --format=custom --no-owner --file "{destination}" "{target}"',
        f'pg_restore --clean --if-exists --no-owner --dbname "{target}" "{destination}"',
    ]


def _copy_database(source: Path, target: Path) -> None:
    # A timeout: the backup's read transaction, or a restore's write, waits
    # for a writer's commit in progress rather than failing at once.
    with (
        _connect(source) as reader,
        _connect(target) as writer,
    ):
        reader.backup(writer)  # pages=-1: the whole database in one step (see the module)


@contextmanager
def _connect(path: Path) -> Iterator[sqlite3.Connection]:
    db = sqlite3.connect(path, timeout=60, isolation_level=None)
    try:
        yield db
    finally:
        db.close()


def _check_integrity(path: Path) -> None:
    with _connect(path) as db:
        verdict = db.execute("PRAGMA quick_check").fetchone()[0]
    if verdict != "ok":
        raise InvalidInput(f"{path} fails SQLite's integrity check: {verdict}")


def _holds_tenants(path: Path) -> bool:
    with _connect(path) as db:
        has_table = db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tenants'"
        ).fetchone()
        return (
            bool(has_table) and db.execute("SELECT 1 FROM tenants LIMIT 1").fetchone() is not None
        )


def _counts(path: Path) -> dict[str, int]:
    tables = ("tenants", "conversations", "messages", "summaries")
    with _connect(path) as db:
        return {t: db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}


def _local_files(database: Path) -> list[str]:
    """The relative paths of the local file contents ``database`` references."""
    with _connect(database) as db:
        uris = [row[0] for row in db.execute("SELECT DISTINCT storage_uri FROM large_files")]
    return sorted(u.removeprefix(LOCAL_SCHEME) for u in uris if u.startswith(LOCAL_SCHEME))


def _copy_files(relative: list[str], source: Path, target: Path) -> tuple[int, list[str]]:
    """Copy each of ``relative`` from ``source`` to ``target``; (copied, missing)."""
    copied, missing = 0, []
    for name in relative:
        origin, copy = source / name, target / name
        if not origin.is_file():
            missing.append(name)
            continue
        if copy.is_file() and copy.stat().st_size == origin.stat().st_size:
            continue  # content-addressed: the same name holds the same bytes
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(origin, copy)
        copied += 1
    return copied, missing

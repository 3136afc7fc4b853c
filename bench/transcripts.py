"""Importing real gateway sessions: messages, tool pairs, import time, context before/after.

Reads every transcript under ``../shared/data`` that a parser supports (pi
session JSONL, Claude Code JSONL), imports each through the same code as
``lcm import`` (bootstrap in chunks, one transaction each) into a fresh
conversation, ``--repeat`` times for the import-time median, then runs one
compaction sweep with the offline extractive summarizer and reports the
context tokens before and after. Runs on the embedded SQLite file and on
Postgres (``LCM_BENCH_DATABASE_URL`` or a private embedded server, fsync on).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from bench.servers import postgres
from lcm.compaction.engine import CompactionEngine
from lcm.compaction.inline import compact_now
from lcm.compaction.jobs import CompactionJobs
from lcm.db.engine import Database
from lcm.db.migrate import upgrade
from lcm.errors import InvalidInput
from lcm.files.storage import build_storage
from lcm.settings import Settings
from lcm.summarize.extractive import ExtractiveProvider
from lcm.summarize.summarizer import Summarizer
from lcm.tenants.service import create_tenant
from lcm.transcripts.importer import import_transcript
from lcm.transcripts.parse import peek
from lcm.transcripts.repository import TranscriptRepository
from lcm.transcripts.service import BootstrapOptions

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
TOKEN_BUDGET = 200_000


def transcripts() -> list[Path]:
    """The supported transcripts under ``DATA`` (format told from content, not names)."""
    found = []
    for path in sorted(DATA.rglob("*.jsonl")):
        try:
            peek(path.read_bytes())
        except InvalidInput:
            continue
        found.append(path)
    return found


def _measure(database: Database, files: list[Path], repeat: int, label: str) -> None:
    settings = database.settings
    with database.session() as session:
        tenant_id = create_tenant(session, f"bench-{time.monotonic_ns()}").tenant_id
        session.commit()
    options = BootstrapOptions.from_settings(settings, build_storage(settings))
    engine = CompactionEngine(database.transaction, Summarizer(ExtractiveProvider()))
    jobs = CompactionJobs(database.transaction, engine, settings, owner="bench")
    print(f"  [{label}]", flush=True)
    header = (
        f"  {'session':34} {'format':11} {'msgs':>5} {'pairs':>5} {'import s':>8} "
        f"{'msg/s':>6} {'context tokens before -> after':>31} {'passes':>6} {'sweep s':>7}"
    )
    print(header, flush=True)
    for path in files:
        data = path.read_bytes()
        seconds, first = [], None
        for run in range(repeat):
            outcome = import_transcript(
                database.transaction, tenant_id, f"{path.stem}-{run}", data, options
            )
            seconds.append(outcome.seconds)
            first = first or outcome
        assert first is not None
        with database.session() as session:
            pairs = TranscriptRepository(session).tool_pairs(first.conversation_id)
        started = time.perf_counter()
        sweep = compact_now(jobs, tenant_id, first.conversation_id, TOKEN_BUDGET)
        sweep_s = time.perf_counter() - started
        assert sweep is not None, "nothing else holds this conversation's lease"
        median = statistics.median(seconds)
        print(
            f"  {path.name[:34]:34} {first.format:11} {first.imported:>5} {pairs:>5} "
            f"{median:>8.3f} {first.imported / median:>6.0f} "
            f"{sweep.tokens_before:>14,} -> {sweep.tokens_after:>13,} {len(sweep.passes):>6} "
            f"{sweep_s:>7.2f}",
            flush=True,
        )


def run(args: argparse.Namespace) -> None:
    files = transcripts()
    if not files:
        print(f"  no transcripts under {DATA}: nothing to measure", flush=True)
        return
    print(
        f"  {len(files)} real sessions; import time is the median of {args.repeat} runs; "
        f"one sweep (extractive summarizer, budget {TOKEN_BUDGET:,}, default settings)",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/bench.db"
        upgrade(url)
        sqlite = Database(Settings(database_url=url, files_dir=Path(tmp) / "files"))
        _measure(sqlite, files, args.repeat, "sqlite (embedded)")
        sqlite.dispose()
        with postgres() as pg_url:
            pg = Database(Settings(database_url=pg_url, files_dir=Path(tmp) / "files"))
            _measure(pg, files, args.repeat, "postgres (fsync on)")
            pg.dispose()

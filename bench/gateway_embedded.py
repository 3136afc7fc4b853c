"""``bench gateway --embedded``: the gateway load against ``lcm serve`` on SQLite.

The same replayed turns and fake model as ``bench gateway``, against the
embedded deployment: one ``lcm serve`` process (the API and its in-process
worker) on a fresh SQLite home. Its reference is ``bench/reference_sqlite.py``,
the same minimal endpoint as the scaled mode's on SQLite (the same rows, one
durable commit per call), run before and after, the ratio taken against the
mean of the two as there.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path

from bench.deployment import DEPLOYMENT_ENV, CpuMeter
from bench.gateway import (
    DebtRead,
    Outcome,
    ReferenceServer,
    Sampler,
    audit,
    print_backlog,
    serve_reference,
)
from bench.workload import LcmTarget, Load, ModelLikeLLM, Step, drive_load
from lcm.db.engine import Database
from lcm.db.migrate import upgrade
from lcm.settings import Settings
from lcm.tenants.service import create_tenant
from tests import servers


def sqlite_debt(path: Path) -> Callable[[], tuple[DebtRead, Callable[[], None]]]:
    """A :class:`~bench.gateway.Sampler` reader of the debt table in a SQLite file."""

    def open_reader() -> tuple[DebtRead, Callable[[], None]]:
        conn = sqlite3.connect(path)

        def read() -> tuple[int, int, float]:
            row = conn.execute(
                "SELECT count(*) FILTER (WHERE status IN ('pending', 'running')),"
                " count(*) FILTER (WHERE status = 'running'),"
                " coalesce((julianday('now') - julianday(min(enqueued_at)"
                "   FILTER (WHERE status IN ('pending', 'running')))) * 86400, 0)"
                " FROM compaction_debt"
            ).fetchone()
            return int(row[0]), int(row[1]), float(row[2])

        return read, conn.close

    return open_reader


def run_serve(workdir: Path, load: Load, steps: list[Step], llm: ModelLikeLLM) -> Outcome:
    """``lcm serve`` on a fresh SQLite home under the load; its audit read meanwhile."""
    home = workdir / "home"
    home.mkdir()
    path = home / "lcm.db"
    url = f"sqlite:///{path}"
    upgrade(url)
    empty = _file_bytes(path)  # the migrated schema's own pages, not data
    database = Database(Settings(database_url=url, broker_url="memory://"))
    with database.transaction() as session:
        issued = [create_tenant(session, f"gateway-{t}") for t in range(load.tenants)]
    database.dispose()
    env = {**DEPLOYMENT_ENV, "LCM_HOME": str(home), "LCM_ANTHROPIC_BASE_URL": llm.base_url}
    # Three minutes to start, as a scaled deployment gets (bench/deployment.py).
    serve = servers.start_serve(env, log=workdir / "serve.log", ready_seconds=180)
    try:
        meter = CpuMeter({"serve": [serve.process.pid]})
        target = LcmTarget(serve.base_url, [i.api_key for i in issued], load.token_budget)
        calls_before = llm.calls
        with Sampler(sqlite_debt(path), llm) as sampler:
            drive = asyncio.run(drive_load(target, steps, load))
            cores = meter.cores()
            count, problems = audit(
                url,
                [i.tenant_id for i in issued],
                {key: n for (_, key), n in drive.sent.items()},
            )
    finally:
        serve.stop()
    messages, failed = _counts(path)
    return Outcome(
        "embedded",
        drive,
        sampler.samples,
        llm_available=Settings.model_fields["worker_concurrency"].default,
        llm_calls=llm.calls - calls_before,
        failed_debt=failed,
        audit=problems,
        conversations_audited=count,
        stored_messages=messages,
        stored_bytes=_file_bytes(path) - empty,
        cores=cores,
    )


def _file_bytes(path: Path) -> int:
    """The database's bytes on disk, its write-ahead log folded in first."""
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path.stat().st_size


def _counts(path: Path) -> tuple[int, int]:
    """Messages stored, and compaction debt that failed."""
    with sqlite3.connect(path) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM messages),"
            " (SELECT count(*) FROM compaction_debt WHERE status = 'failed')"
        ).fetchone()
    return int(row[0]), int(row[1])


def run_reference_sqlite(workdir: Path, load: Load, steps: list[Step], when: str) -> Outcome:
    path = workdir / f"reference-{when}.db"
    return serve_reference(
        ReferenceServer("bench.reference_sqlite:app", {"REFERENCE_SQLITE_PATH": str(path)}),
        workdir,
        load,
        steps,
        1,
        f"ref SQLite {when}",
        {},
    )


def measure_embedded(load: Load, steps: list[Step]) -> list[Outcome]:
    """The reference before, ``lcm serve``, the reference after (the report's order)."""
    workdir = servers.make_workdir()
    outcomes = [run_reference_sqlite(workdir, load, steps, "before")]
    with ModelLikeLLM() as llm:
        outcome = run_serve(workdir, load, steps, llm)
    print_backlog(outcome)
    outcomes.append(outcome)
    outcomes.append(run_reference_sqlite(workdir, load, steps, "after"))
    return outcomes

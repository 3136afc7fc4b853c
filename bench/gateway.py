"""Gateway load on the scaled deployment: capacity, latency, compaction backlog, losslessness.

Starts every part as a real process: Postgres (``LCM_BENCH_DATABASE_URL`` or
a private embedded server, fsync on), Redis, ``lcm api --processes N``, ``M``
``lcm worker`` processes, ``lcm beat``, and a fake Messages API answering
after a lognormal delay (p50 1.5 s, p99 6 s, like a real model's). Then
``T`` tenants x ``C`` conversations replay real agent sessions from
``../shared/data`` (or synthetic ones when it is absent) through
``lcm_client``, flat out or at a target rate, for a fixed time. One turn is
what a gateway does around one model call: ingest the call's new input
(the user's prompt or the tool results), assemble the context, and post the
model's reply as the after-turn (``POST …/turns``), which records compaction
debt over the threshold.

Each deployment gets a fresh database and Redis, and reports turns/s and
messages/s, p50/p99 per endpoint, the compaction backlog over time (debt
outstanding and its oldest wake-up's age), LLM calls in flight against the
worker threads available, errors, and a losslessness audit of every
conversation (each message stored once, and reachable once from the context)
read from one snapshot while the workers still run. The same load against
``bench/reference_app.py`` (FastAPI + psycopg inserting the same message and
part rows, one durable commit per call) is the reference, run before and
after the deployments (ratios are to the mean of the two).

The turns and the targets they are sent to are in ``bench/workload.py``;
the processes and their CPU in ``bench/deployment.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from bench.deployment import (
    WORKER_THREADS,
    CpuMeter,
    Servers,
    Shape,
    bench_servers,
    drop_database,
    fresh_database,
    lcm_deployment,
    postmaster_pid,
    redis_database,
    spawn,
    stop,
)
from bench.workload import (
    ENDPOINTS,
    LLM_P50,
    LLM_P99,
    TOKEN_BUDGET,
    Drive,
    LcmTarget,
    Load,
    ModelLikeLLM,
    ReferenceTarget,
    Step,
    drive_load,
    real_steps,
    synthetic_steps,
)
from lcm.compaction.repository import CompactionRepository
from lcm.db.engine import Database
from lcm.db.migrate import upgrade
from lcm.db.models import Conversation, Message
from lcm.settings import Settings
from lcm.tenants.service import create_tenant
from tests import servers

# --- what a run measures --------------------------------------------------------


@dataclass
class Sample:
    at: float
    outstanding: int
    running: int
    oldest_age: float
    llm_in_flight: int


@dataclass
class Outcome:
    label: str
    drive: Drive
    samples: list[Sample] = field(default_factory=list)
    llm_available: int = 0
    llm_calls: int = 0
    failed_debt: int = 0
    audit: list[str] = field(default_factory=list)
    conversations_audited: int = 0
    stored_messages: int = 0
    stored_bytes: int = 0  # tables, indexes and TOAST of every tenant table
    cores: dict[str, float] = field(default_factory=dict)  # CPU used during the load, by part


DebtRead = Callable[[], tuple[int, int, float]]  # outstanding, running, oldest wake-up's age


class Sampler:
    """Every second: debt outstanding, its oldest wake-up, LLM calls in flight.

    ``open_reader`` is called in the sampling thread and returns a function
    reading the debt figures and one closing what it opened.
    """

    def __init__(
        self, open_reader: Callable[[], tuple[DebtRead, Callable[[], None]]], llm: ModelLikeLLM
    ) -> None:
        self.open_reader, self.llm = open_reader, llm
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gateway-sampler", daemon=True)
        self._started = time.perf_counter()

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        read, close = self.open_reader()
        try:
            while not self._stop.wait(1.0):
                outstanding, running, oldest = read()
                self.samples.append(
                    Sample(
                        time.perf_counter() - self._started,
                        outstanding,
                        running,
                        oldest,
                        self.llm.in_flight,
                    )
                )
        finally:
            close()


def postgres_debt(url: str) -> Callable[[], tuple[DebtRead, Callable[[], None]]]:
    """A :class:`Sampler` reader of the debt table on Postgres."""

    def open_reader() -> tuple[DebtRead, Callable[[], None]]:
        conn = psycopg.connect(url, autocommit=True)

        def read() -> tuple[int, int, float]:
            row = conn.execute(
                "SELECT count(*) FILTER (WHERE status IN ('pending', 'running')),"
                " count(*) FILTER (WHERE status = 'running'),"
                " coalesce(extract(epoch FROM now() - min(enqueued_at)"
                "   FILTER (WHERE status IN ('pending', 'running'))), 0)"
                " FROM compaction_debt"
            ).fetchone()
            assert row is not None
            return int(row[0]), int(row[1]), float(row[2])

        return read, conn.close

    return open_reader


@contextmanager
def snapshot(url: str) -> Iterator[Session]:
    """A session reading one snapshot of ``url`` while the workers still compact.

    REPEATABLE READ on Postgres; on SQLite a read transaction (WAL) is one.
    """
    if url.startswith("sqlite"):
        database = Database(Settings(database_url=url, broker_url="memory://"))
        try:
            with database.read_session() as session:
                yield session
        finally:
            database.dispose()
        return
    engine = create_engine(
        url.replace("postgresql://", "postgresql+psycopg://", 1), isolation_level="REPEATABLE READ"
    )
    try:
        with Session(engine) as session:
            yield session
    finally:
        engine.dispose()


def audit(url: str, tenant_ids: list[str], sent: dict[str, int]) -> tuple[int, list[str]]:
    """Problems found in one snapshot: each message stored once and reachable once.

    ``sent`` is the number of messages the server acknowledged per session key.
    """
    problems: list[str] = []
    with snapshot(url) as session:
        conversations = session.execute(
            select(Conversation.id, Conversation.session_key).where(
                Conversation.tenant_id.in_(tenant_ids)
            )
        ).all()
        repo = CompactionRepository(session)
        for cid, key in conversations:
            rows = session.execute(
                select(Message.id, Message.client_id).where(Message.conversation_id == cid)
            ).all()
            ids = {r.id for r in rows}
            client_ids = Counter(r.client_id for r in rows)
            reachable = Counter(repo.reachable_message_ids(cid))
            if len(rows) != sent.get(key, 0):
                problems.append(f"{key}: {len(rows)} stored, {sent.get(key, 0)} acknowledged")
            if client_ids and max(client_ids.values()) > 1:
                problems.append(f"{key}: a message stored twice")
            if set(reachable) != ids:
                problems.append(f"{key}: {len(ids - set(reachable))} messages unreachable")
            if reachable and max(reachable.values()) > 1:
                problems.append(f"{key}: a message reachable twice")
        if len(conversations) != len(sent):
            problems.append(f"{len(conversations)} conversations stored, {len(sent)} driven")
        return len(conversations), problems


def run_lcm(
    srv: Servers, shape: Shape, load: Load, steps: list[Step], llm: ModelLikeLLM, index: int
) -> Outcome:
    name = f"gateway_{os.getpid()}_{index}"
    url = fresh_database(srv.admin_url, name)
    try:
        upgrade(url)
        with psycopg.connect(url) as conn:
            empty_bytes = storage(conn)[1]  # the migrated schema's own pages, not data
        database = Database(Settings(database_url=url, broker_url="memory://"))
        issued = []
        with database.transaction() as session:
            for t in range(load.tenants):
                issued.append(create_tenant(session, f"gateway-{t}"))
        database.dispose()
        redis_url = redis_database(srv, index)
        with lcm_deployment(srv, url, redis_url, llm.base_url, shape, f"d{index}") as (base, pids):
            roots = {**pids, "postgres": [postmaster_pid(url)]}
            if srv.redis_pid is not None:
                roots["redis"] = [srv.redis_pid]
            meter = CpuMeter(roots)
            target = LcmTarget(base, [i.api_key for i in issued], load.token_budget)
            calls_before = llm.calls
            with Sampler(postgres_debt(url), llm) as sampler:
                drive = asyncio.run(drive_load(target, steps, load))
                cores = meter.cores()
                count, problems = audit(
                    url,
                    [i.tenant_id for i in issued],
                    {key: n for (_, key), n in drive.sent.items()},
                )
            with psycopg.connect(url) as conn:
                row = conn.execute(
                    "SELECT count(*) FROM compaction_debt WHERE status = 'failed'"
                ).fetchone()
                stored = storage(conn)
            outcome = Outcome(
                shape.label,
                drive,
                sampler.samples,
                llm_available=shape.workers * WORKER_THREADS,
                llm_calls=llm.calls - calls_before,
                failed_debt=int(row[0]) if row else 0,
                audit=problems,
                conversations_audited=count,
                stored_messages=stored[0],
                stored_bytes=stored[1] - empty_bytes,
                cores=cores,
            )
        return outcome
    finally:
        drop_database(srv.admin_url, name)


def storage(conn: psycopg.Connection[Any]) -> tuple[int, int]:
    """Messages stored, and the bytes on disk of every table holding a tenant's data."""
    row = conn.execute(
        "SELECT (SELECT count(*) FROM messages),"
        " (SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c"
        "  JOIN pg_namespace n ON n.oid = c.relnamespace"
        "  WHERE n.nspname = 'public' AND c.relkind = 'r' AND c.relname <> 'alembic_version')"
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1] or 0)


def run_reference(
    srv: Servers, load: Load, steps: list[Step], api_processes: int, when: str
) -> Outcome:
    name = f"gateway_ref_{os.getpid()}_{when}"
    url = fresh_database(srv.admin_url, name)
    try:
        return serve_reference(
            ReferenceServer("bench.reference_app:app", {"REFERENCE_DATABASE_URL": url}),
            srv.workdir,
            load,
            steps,
            api_processes,
            f"ref N={api_processes} {when}",
            {"postgres": [postmaster_pid(url)]},
        )
    finally:
        drop_database(srv.admin_url, name)


@dataclass(frozen=True)
class ReferenceServer:
    app: str  # uvicorn's module:attribute
    env: dict[str, str]


def serve_reference(
    reference: ReferenceServer,
    workdir: Path,
    load: Load,
    steps: list[Step],
    api_processes: int,
    label: str,
    parts: dict[str, list[int]],
) -> Outcome:
    """The load against a reference app under uvicorn; ``parts`` are its other processes."""
    port = servers.free_port()
    log = workdir / "reference.log"
    server = spawn(
        ["uvicorn", reference.app, "--host", "127.0.0.1", "--port", str(port),
         "--workers", str(api_processes), "--log-level", "warning"],
        reference.env, log, Path(__file__).resolve().parents[1],
    )  # fmt: skip
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.post(f"{base}/v1/conversations/warm/assemble", json={}, timeout=1)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError(
                        f"reference did not start: {log.read_text()[-2000:]}"
                    ) from None
                time.sleep(0.1)
        meter = CpuMeter({"api": [server.pid], **parts})
        drive = asyncio.run(
            drive_load(ReferenceTarget(base, load.tenants, load.token_budget), steps, load)
        )
        return Outcome(label, drive, cores=meter.cores())
    finally:
        stop([server])


# --- the report -------------------------------------------------------------------


def _pct(values: list[float], q: int) -> float:
    if not values:
        return float("nan")
    if len(values) < 2:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def print_backlog(outcome: Outcome) -> None:
    print(f"  backlog over time [{outcome.label}] (every ~5 s):", flush=True)
    print(f"    {'t s':>5} {'debt':>5} {'running':>7} {'oldest s':>8} {'LLM in flight':>13}")
    for sample in outcome.samples[::5]:
        print(
            f"    {sample.at:5.0f} {sample.outstanding:5d} {sample.running:7d} "
            f"{sample.oldest_age:8.1f} {sample.llm_in_flight:8d}/{outcome.llm_available}"
        )


def row(outcome: Outcome) -> str:
    d = outcome.drive
    lat = [f"{_pct(d.latencies[e], 50):6.1f}/{_pct(d.latencies[e], 99):7.1f}" for e in ENDPOINTS]
    llm = [s.llm_in_flight for s in outcome.samples]
    backlog = max((s.outstanding for s in outcome.samples), default=0)
    oldest = max((s.oldest_age for s in outcome.samples), default=0.0)
    llm_text = (
        f"{statistics.mean(llm):5.1f}/{max(llm):3d} of {outcome.llm_available:3d}"
        if llm
        else f"{'-':>17}"
    )
    audit_text = (
        "-" if not outcome.conversations_audited and not outcome.audit else
        ("clean" if not outcome.audit else f"{len(outcome.audit)} problems")
    )  # fmt: skip
    return (
        f"  {outcome.label:16} {d.turns / d.seconds:7.1f} {d.messages / d.seconds:7.1f} "
        f"{'  '.join(lat)}  {backlog:5d} {oldest:6.1f}  {llm_text}  "
        f"{sum(d.errors.values()) + outcome.failed_debt:4d}  {audit_text}"
    )


HEADER = (
    f"  {'deployment':16} {'turns/s':>7} {'msgs/s':>7} "
    f"{'ingest p50/p99 ms':>14}  {'assemble p50/p99':>14}  {'turns p50/p99':>14}  "
    f"{'debt':>5} {'oldest':>6}  {'LLM mean/peak of avail':>17}  {'errs':>4}  audit"
)


def measure(
    srv: Servers, shapes: list[Shape], load: Load, steps: list[Step], *, reference: bool = True
) -> list[Outcome]:
    outcomes = []
    if reference:
        # Bracketed: this shared host's speed drifts by tens of percent within
        # minutes, so the reference runs before and after the deployments and
        # each ratio is taken against the mean of the two.
        outcomes.append(run_reference(srv, load, steps, 1, "before"))
    llm = ModelLikeLLM()
    llm.start()
    try:
        for index, shape in enumerate(shapes):
            outcome = run_lcm(srv, shape, load, steps, llm, index)
            print_backlog(outcome)
            print(HEADER)
            print(row(outcome), flush=True)
            used = ", ".join(f"{name} {c:.2f}" for name, c in outcome.cores.items())
            print(f"    CPU cores used: {used}", flush=True)
            for problem in outcome.audit[:10]:
                print(f"    audit: {problem}")
            for error, count in outcome.drive.errors.most_common(5):
                print(f"    error x{count}: {error}")
            outcomes.append(outcome)
    finally:
        llm.stop()
    if reference:
        outcomes.append(run_reference(srv, load, steps, 1, "after"))
    return outcomes


def run(args: argparse.Namespace) -> None:
    steps = real_steps()
    source = "real sessions from ../shared/data" if steps else "synthetic sessions"
    steps = steps or synthetic_steps()
    sizes = [len(json.dumps(c)) for s in steps for _, c in (*s.inputs, *s.outputs)]
    print(
        f"  replaying {len(steps)} model calls ({source}; {len(sizes)} messages, "
        f"median {statistics.median(sizes):.0f} chars); LLM lognormal p50 {LLM_P50} s, "
        f"p99 {LLM_P99} s; budget {TOKEN_BUDGET} tokens",
        flush=True,
    )
    load = Load(args.tenants, args.conversations, args.seconds, args.rate)
    shapes = [Shape(n, m) for n in args.api_processes for m in args.workers]
    print(
        f"  {load.tenants} tenants x {load.conversations} conversations, "
        f"{'flat out' if load.rate is None else f'{load.rate} turns/s'}, {load.seconds:.0f} s each",
        flush=True,
    )
    if args.embedded:
        from bench.gateway_embedded import measure_embedded  # it builds on this module

        report(measure_embedded(load, steps))
        return
    with bench_servers() as srv:
        outcomes = measure(srv, shapes, load, steps)
    report(outcomes)


def report(outcomes: list[Outcome]) -> None:
    """The capacity table, each deployment's ratio to the reference, CPU by part."""
    print("  capacity table:")
    print(HEADER)
    for outcome in outcomes:
        print(row(outcome))
    references, deployments = outcomes[:: len(outcomes) - 1], outcomes[1:-1]
    ref_rate = statistics.mean(r.drive.turns / r.drive.seconds for r in references)
    for outcome in deployments:
        rate = outcome.drive.turns / outcome.drive.seconds
        print(
            f"  {outcome.label}: {rate / ref_rate:5.1%} of the reference's turns/s "
            f"(the mean of before and after, {ref_rate:.1f})"
        )
    per_core(deployments[0], os.cpu_count() or 1)
    for reference in references:
        used = ", ".join(f"{name} {c:.2f}" for name, c in reference.cores.items())
        print(f"  CPU cores used by the reference ({reference.label}): {used}")


def per_core(outcome: Outcome, cores: int) -> None:
    """The capacity model's inputs (docs/performance.md): one deployment's figures per core."""
    d = outcome.drive
    turns_per_s = d.turns / d.seconds
    parts = ", ".join(
        f"{name} {used:.2f} ({used * 1000 / turns_per_s:.1f} ms/turn)"
        for name, used in outcome.cores.items()
    )
    print(f"  CPU cores used during the load ({outcome.label}): {parts}")
    per_message = outcome.stored_bytes / max(1, outcome.stored_messages)
    print(
        f"  per core ({outcome.label}, {cores} cores for everything: load, API, workers, "
        f"Postgres, Redis): {d.turns / d.seconds / cores:.1f} turns/s, "
        f"{d.messages / d.seconds / cores:.1f} messages/s, "
        f"{outcome.llm_calls / d.seconds / cores:.2f} LLM passes/s; storage "
        f"{per_message:,.0f} bytes per message ({outcome.stored_messages} messages, "
        f"{outcome.stored_bytes / 1e6:.1f} MB incl. indexes) = "
        f"{per_message * 1e6 / 1e9:.2f} GB per million messages"
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("gateway")
    group.add_argument("--tenants", type=int, default=4)
    group.add_argument("--conversations", type=int, default=4, help="per tenant")
    group.add_argument("--seconds", type=float, default=25.0, help="load time per deployment")
    group.add_argument(
        "--rate", type=float, default=None, help="turns/s in all (default: flat out)"
    )
    group.add_argument("--api-processes", type=int, nargs="+", default=[1, 2])
    group.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    # --embedded (hot_paths declares it): lcm serve on SQLite against the
    # reference on SQLite, instead of the N x M deployments.

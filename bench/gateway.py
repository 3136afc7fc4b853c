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
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx
import psycopg
from psycopg import sql
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from api.contract import AssembleIn, MessageIn, MessagesIn, TurnIn
from bench.transcripts import DATA
from lcm.compaction.repository import CompactionRepository
from lcm.db.engine import Database
from lcm.db.migrate import upgrade
from lcm.db.models import Conversation, Message
from lcm.errors import InvalidInput
from lcm.settings import Settings
from lcm.tenants.service import create_tenant
from lcm.transcripts.parse import parse_transcript
from lcm_client import NO_RETRIES, AsyncLcmClient, LcmClientError
from tests import servers
from tests.fakes import FakeAnthropicServer
from tests.fakes.anthropic_script import Behaviour

TOKEN_BUDGET = 24_000
WORKER_THREADS = 16  # lcm worker's default LCM_WORKER_CONCURRENCY
LLM_P50, LLM_P99 = 1.5, 6.0
# Compaction starts within a short run: a small fresh tail at a 24k budget.
DEPLOYMENT_ENV = {
    "LCM_FRESH_TAIL_COUNT": "16",
    "LCM_LOG_LEVEL": "WARNING",
    "ANTHROPIC_API_KEY": "sk-bench",
}
ENDPOINTS = ("ingest", "assemble", "turns")


# --- the turns replayed ---------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One model call: the messages sent to it (new since the last) and its reply."""

    inputs: tuple[tuple[str, Any], ...]
    outputs: tuple[tuple[str, Any], ...]


def steps_of(messages: list[tuple[str, Any]]) -> list[Step]:
    """Split a session into model calls: inputs (user/tool) then the reply (assistant)."""
    steps: list[Step] = []
    inputs: list[tuple[str, Any]] = []
    outputs: list[tuple[str, Any]] = []
    for role, content in messages:
        if role == "assistant":
            outputs.append((role, content))
            continue
        if outputs:
            steps.append(Step(tuple(inputs), tuple(outputs)))
            inputs, outputs = [], []
        inputs.append((role, content))
    if inputs and outputs:
        steps.append(Step(tuple(inputs), tuple(outputs)))
    return [s for s in steps if s.inputs]


def real_steps(data: Path = DATA) -> list[Step]:
    """The model calls of every parseable session under ``data`` (empty when absent)."""
    steps: list[Step] = []
    for path in sorted(data.rglob("*.jsonl")) if data.is_dir() else []:
        try:
            parsed = parse_transcript(path.read_bytes())
        except InvalidInput:
            continue
        steps.extend(steps_of([(m.role, m.content) for m in parsed.messages]))
    return steps


def synthetic_steps(count: int = 400, seed: int = 7) -> list[Step]:
    """Sessions shaped like the real ones: a prompt or tool results in, a tool call out."""
    rng = random.Random(seed)
    steps = []
    for n in range(count):
        call_id = f"toolu_syn_{n}"
        size = int(rng.lognormvariate(math.log(300), 1.2))
        words = " ".join(f"w{rng.randrange(5000)}" for _ in range(max(1, size // 6)))
        if n % 5 == 0:
            inputs: tuple[tuple[str, Any], ...] = (("user", f"please look at module {n}: {words}"),)
        else:
            result = {"type": "tool_result", "tool_use_id": f"toolu_syn_{n - 1}", "content": words}
            inputs = (("user", [result]),)
        reply = [
            {"type": "text", "text": f"Reading lib/module_{n}.py next."},
            {"type": "tool_use", "id": call_id, "name": "Read", "input": {"path": f"lib/m{n}.py"}},
        ]
        steps.append(Step(inputs, (("assistant", reply),)))
    return steps


# --- the model --------------------------------------------------------------------


class ModelLikeLLM(FakeAnthropicServer):
    """The fake Messages API with a lognormal reply time, counting calls in flight."""

    def __init__(self, p50: float = LLM_P50, p99: float = LLM_P99, seed: int = 11) -> None:
        super().__init__()
        self._mu = math.log(p50)
        self._sigma = math.log(p99 / p50) / 2.326  # z of the 99th percentile
        self._rng = random.Random(seed)
        self._gauge = threading.Lock()  # handler threads update the counters together
        self.in_flight = 0
        self.calls = 0

    def _next_behaviour(self, model: str) -> Behaviour:
        with self._gauge:
            delay = self._rng.lognormvariate(self._mu, self._sigma)
        return Behaviour.ok(delay=min(delay, 30.0))

    def _record(self, body: dict[str, Any], headers: dict[str, str]) -> int:
        # Counted, not kept: a long run would hold every prompt in memory.
        with self._gauge:
            self.calls += 1
            return self.calls

    def respond(
        self, body: dict[str, Any], headers: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        with self._gauge:
            self.in_flight += 1
        try:
            return super().respond(body, headers)
        finally:
            with self._gauge:
                self.in_flight -= 1


# --- the load ---------------------------------------------------------------------


class Target(Protocol):
    """The three calls of a turn, against lcm-server or the reference."""

    async def ingest(self, tenant: int, key: str, messages: list[MessageIn]) -> int: ...
    async def assemble(self, tenant: int, key: str) -> None: ...
    async def turn(self, tenant: int, key: str, messages: list[MessageIn]) -> int: ...
    async def close(self) -> None: ...


class LcmTarget:
    def __init__(self, base_url: str, keys: list[str], token_budget: int) -> None:
        self.token_budget = token_budget
        # No retries: a 429/503 here is an error the run must report, not hide.
        self.clients = [AsyncLcmClient(base_url, key, retry=NO_RETRIES) for key in keys]

    async def ingest(self, tenant: int, key: str, messages: list[MessageIn]) -> int:
        out = await self.clients[tenant].ingest(key, MessagesIn(messages=messages))
        return out.ingested

    async def assemble(self, tenant: int, key: str) -> None:
        await self.clients[tenant].assemble(key, AssembleIn(token_budget=self.token_budget))

    async def turn(self, tenant: int, key: str, messages: list[MessageIn]) -> int:
        body = TurnIn(messages=messages, token_budget=self.token_budget)
        return (await self.clients[tenant].turn(key, body)).ingested

    async def close(self) -> None:
        for client in self.clients:
            await client.aclose()


class ReferenceTarget:
    def __init__(self, base_url: str, tenants: int, token_budget: int) -> None:
        self.token_budget = token_budget
        self.http = httpx.AsyncClient(base_url=base_url, timeout=60)
        self.tokens = [f"Bearer reference-tenant-{n:04d}" for n in range(tenants)]

    async def _post(self, tenant: int, path: str, body: dict[str, Any]) -> dict[str, Any]:
        r = await self.http.post(path, json=body, headers={"authorization": self.tokens[tenant]})
        r.raise_for_status()
        return dict(r.json())

    async def ingest(self, tenant: int, key: str, messages: list[MessageIn]) -> int:
        body = MessagesIn(messages=messages).model_dump(exclude_none=True)
        return int(
            (await self._post(tenant, f"/v1/conversations/{key}/messages", body))["ingested"]
        )

    async def assemble(self, tenant: int, key: str) -> None:
        await self._post(
            tenant, f"/v1/conversations/{key}/assemble", {"token_budget": self.token_budget}
        )

    async def turn(self, tenant: int, key: str, messages: list[MessageIn]) -> int:
        body = TurnIn(messages=messages, token_budget=self.token_budget).model_dump(
            exclude_none=True
        )
        return int((await self._post(tenant, f"/v1/conversations/{key}/turns", body))["ingested"])

    async def close(self) -> None:
        await self.http.aclose()


@dataclass(frozen=True)
class Load:
    tenants: int = 4
    conversations: int = 4  # per tenant, each one turn at a time
    seconds: float = 25.0
    rate: float | None = None  # turns/s over all conversations; None: flat out
    token_budget: int = TOKEN_BUDGET  # of every assemble and after-turn


@dataclass
class Drive:
    """What the clients saw."""

    seconds: float = 0.0
    turns: int = 0
    messages: int = 0
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: Counter[str] = field(default_factory=Counter)
    sent: dict[tuple[int, str], int] = field(default_factory=lambda: defaultdict(int))


def _messages(key: str, first: int, items: tuple[tuple[str, Any], ...]) -> list[MessageIn]:
    return [
        MessageIn(role=role, content=content, id=f"{key}-{first + n}")
        for n, (role, content) in enumerate(items)
    ]


async def _conversation(
    target: Target, tenant: int, key: str, steps: list[Step], offset: int, load: Load, drive: Drive
) -> None:
    deadline = time.perf_counter() + load.seconds
    interval = load.tenants * load.conversations / load.rate if load.rate else 0.0
    next_at = time.perf_counter()
    n, stored = offset, 0
    while time.perf_counter() < deadline:
        step = steps[n % len(steps)]
        n += 1
        name = "ingest"
        try:
            started = time.perf_counter()
            accepted = await target.ingest(tenant, key, _messages(key, stored, step.inputs))
            drive.sent[(tenant, key)] += accepted
            drive.latencies[name].append((time.perf_counter() - started) * 1000)
            name = "assemble"
            started = time.perf_counter()
            await target.assemble(tenant, key)
            drive.latencies[name].append((time.perf_counter() - started) * 1000)
            name = "turns"
            started = time.perf_counter()
            replies = _messages(key, stored + len(step.inputs), step.outputs)
            replied = await target.turn(tenant, key, replies)
            drive.sent[(tenant, key)] += replied
            drive.latencies[name].append((time.perf_counter() - started) * 1000)
        except (LcmClientError, httpx.HTTPError) as exc:
            drive.errors[f"{name}: {type(exc).__name__}: {str(exc)[:120]}"] += 1
            return  # the conversation's ids would be out of step: stop it
        drive.messages += accepted + replied
        stored += len(step.inputs) + len(step.outputs)
        drive.turns += 1
        if interval:
            next_at += interval
            await asyncio.sleep(max(0.0, next_at - time.perf_counter()))


async def drive_load(target: Target, steps: list[Step], load: Load) -> Drive:
    drive = Drive()
    rng = random.Random(3)
    started = time.perf_counter()
    await asyncio.gather(
        *(
            _conversation(target, t, f"gw-t{t}-c{c}", steps, rng.randrange(len(steps)), load, drive)
            for t in range(load.tenants)
            for c in range(load.conversations)
        )
    )
    drive.seconds = time.perf_counter() - started
    await target.close()
    return drive


# --- the deployment ---------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    api_processes: int
    workers: int

    @property
    def label(self) -> str:
        return f"N={self.api_processes} M={self.workers}"


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


@dataclass(frozen=True)
class Servers:
    admin_url: str
    redis_url: str  # a base URL; each deployment takes its own database number
    workdir: Path
    redis_pid: int | None = None  # None: a Redis this run does not own (its CPU is not counted)


def fresh_database(admin_url: str, name: str) -> str:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return servers.with_database(admin_url, name)


def drop_database(admin_url: str, name: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def _spawn(args: list[str], env: dict[str, str], log: Path, cwd: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", *args],
            env={**os.environ, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
        )


def _stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        process.terminate()
    for process in processes:
        try:
            # Warm shutdown: a worker finishes the passes it holds (a few LLM
            # latencies at most) so no lease is left to expire.
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def _wait_ready(base_url: str, processes: list[subprocess.Popen[bytes]], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in processes):
            raise RuntimeError(f"a process exited: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"{base_url}/readyz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{base_url} did not become ready")


def redis_database(srv: Servers, index: int) -> str:
    """The Redis URL of deployment ``index``: a database of its own on the run's Redis."""
    return srv.redis_url.rsplit("/", 1)[0] + f"/{index + 1}"


def deployment_env(url: str, redis_url: str, llm_url: str) -> dict[str, str]:
    """A deployment's processes' environment: its database, its Redis, the fake model."""
    return {
        **DEPLOYMENT_ENV,
        "LCM_DATABASE_URL": url,
        "LCM_BROKER_URL": redis_url,
        "LCM_RESULT_BACKEND_URL": redis_url,
        "LCM_ANTHROPIC_BASE_URL": llm_url,
        "LCM_WORKER_CONCURRENCY": str(WORKER_THREADS),
        "LCM_DB_POOL_SIZE": str(WORKER_THREADS),
    }


@contextmanager
def lcm_deployment(
    srv: Servers, url: str, redis_url: str, llm_url: str, shape: Shape, tag: str
) -> Iterator[tuple[str, dict[str, list[int]]]]:
    """``lcm api``, the workers and beat on ``url``; yields the API's URL and their pids."""
    env = deployment_env(url, redis_url, llm_url)
    port = servers.free_port()
    log = srv.workdir / f"{tag}.log"
    api = _spawn(
        ["cli.main", "api", "--host", "127.0.0.1", "--port", str(port),
         "--processes", str(shape.api_processes)],
        env, log, srv.workdir,
    )  # fmt: skip
    workers = [
        _spawn(["cli.main", "worker", "--hostname", f"{tag}-w{i}@%h"], env, log, srv.workdir)
        for i in range(shape.workers)
    ]
    beat_dir = srv.workdir / f"{tag}-beat"
    beat_dir.mkdir(exist_ok=True)  # beat keeps its schedule file in its working directory
    beat = _spawn(["cli.main", "beat"], env, log, beat_dir)
    processes = [api, *workers, beat]
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_ready(base, processes, log)
        yield base, {"api": [api.pid], "workers": [w.pid for w in workers], "beat": [beat.pid]}
    finally:
        _stop(processes)


TICKS = os.sysconf("SC_CLK_TCK")


def _proc_stat(pid: int) -> tuple[int, float, float] | None:
    """Parent pid, own CPU seconds, and CPU seconds of children it has reaped."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None  # exited meanwhile
    fields = text.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    own = (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime
    reaped = (int(fields[13]) + int(fields[14])) / TICKS  # cutime, cstime
    return int(fields[1]), own, reaped


def tree_cpu_seconds(roots: list[int]) -> float:
    """CPU seconds of ``roots`` and all their descendants, live or already reaped."""
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _proc_stat(int(entry))) is not None:
            stats[int(entry)] = stat
    children: dict[int, list[int]] = defaultdict(list)
    for pid, (ppid, _, _) in stats.items():
        children[ppid].append(pid)
    total, stack = 0.0, list(roots)
    while stack:
        pid = stack.pop()
        if pid in stats:
            total += stats[pid][1] + stats[pid][2]
            stack.extend(children[pid])
    return total


def postmaster_pid(url: str) -> int:
    """The Postgres server process (parent of every backend): its tree is Postgres's CPU."""
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        stat = _proc_stat(int(row[0]))  # while the backend lives: it exits with the connection
    assert stat is not None
    return stat[0]


class CpuMeter:
    """CPU cores each part of the deployment used from now until :meth:`cores`."""

    def __init__(self, roots: dict[str, list[int]]) -> None:
        self.roots = roots
        self._started = time.perf_counter()
        self._before = {name: tree_cpu_seconds(pids) for name, pids in roots.items()}
        self._load_before = time.process_time()  # this process: the clients and the fake LLM

    def cores(self) -> dict[str, float]:
        seconds = time.perf_counter() - self._started
        used = {
            name: (tree_cpu_seconds(pids) - self._before[name]) / seconds
            for name, pids in self.roots.items()
        }
        used["load"] = (time.process_time() - self._load_before) / seconds
        return used


class Sampler:
    """Every second: debt outstanding, its oldest wake-up, LLM calls in flight."""

    def __init__(self, url: str, llm: ModelLikeLLM) -> None:
        self.url, self.llm = url, llm
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
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self._stop.wait(1.0):
                row = conn.execute(
                    "SELECT count(*) FILTER (WHERE status IN ('pending', 'running')),"
                    " count(*) FILTER (WHERE status = 'running'),"
                    " coalesce(extract(epoch FROM now() - min(enqueued_at)"
                    "   FILTER (WHERE status IN ('pending', 'running'))), 0)"
                    " FROM compaction_debt"
                ).fetchone()
                assert row is not None
                self.samples.append(
                    Sample(
                        time.perf_counter() - self._started,
                        int(row[0]),
                        int(row[1]),
                        float(row[2]),
                        self.llm.in_flight,
                    )
                )


def audit(url: str, tenant_ids: list[str], sent: dict[str, int]) -> tuple[int, list[str]]:
    """Problems found in one snapshot: each message stored once and reachable once.

    ``sent`` is the number of messages the server acknowledged per session key.
    REPEATABLE READ: the workers still compact while the audit reads.
    """
    problems: list[str] = []
    engine = create_engine(
        url.replace("postgresql://", "postgresql+psycopg://", 1), isolation_level="REPEATABLE READ"
    )
    try:
        with Session(engine) as session:
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
    finally:
        engine.dispose()


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
            with Sampler(url, llm) as sampler:
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
    port = servers.free_port()
    log = srv.workdir / "reference.log"
    server = _spawn(
        ["uvicorn", "bench.reference_app:app", "--host", "127.0.0.1", "--port", str(port),
         "--workers", str(api_processes), "--log-level", "warning"],
        {"REFERENCE_DATABASE_URL": url}, log, Path(__file__).resolve().parents[1],
    )  # fmt: skip
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
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
        meter = CpuMeter({"api": [server.pid], "postgres": [postmaster_pid(url)]})
        drive = asyncio.run(
            drive_load(ReferenceTarget(base, load.tenants, load.token_budget), steps, load)
        )
        return Outcome(f"ref N={api_processes} {when}", drive, cores=meter.cores())
    finally:
        _stop([server])
        drop_database(srv.admin_url, name)


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


@contextmanager
def bench_servers() -> Iterator[Servers]:
    workdir = servers.make_workdir()
    saved = os.environ.get("LCM_TEST_DATABASE_URL")
    if os.environ.get("LCM_BENCH_DATABASE_URL"):
        os.environ["LCM_TEST_DATABASE_URL"] = os.environ["LCM_BENCH_DATABASE_URL"]
    redis = servers.start_redis(workdir)
    try:
        # The benchmark keeps Postgres's durable defaults (fsync on).
        handle = servers.start_postgres(workdir, fast=False)
        pid = redis.process.pid if redis.process is not None else None
        yield Servers(handle.admin_url, redis.url, workdir, pid)
        handle.drop()
    finally:
        redis.stop()
        if saved is None:
            os.environ.pop("LCM_TEST_DATABASE_URL", None)
        else:
            os.environ["LCM_TEST_DATABASE_URL"] = saved


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
    with bench_servers() as srv:
        outcomes = measure(srv, shapes, load, steps)
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
    """The capacity model's inputs (docs/scaling.md): one deployment's figures per core."""
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

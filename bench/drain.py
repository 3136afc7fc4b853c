"""Service-loop drain (issue: the service loop): how close workers get to the LLM bound.

``N`` conversations each owe exactly one leaf pass; the fake Messages API
answers every summary after 1 s. With ``C`` threads in total the lower bound
is ``N * 1 s / C``; efficiency is that bound over the measured drain time.
Three drains: one ``lcm worker`` process, then two, each with eight passes
per thread (``N`` = 200, then 400, at the default 25 threads), and two
processes with 200 (four passes per thread, the figure this benchmark first
reported). A drain loses a roughly fixed time to its start and end (the
first wave's replies arrive together and spread out over the first few
waves), so its efficiency depends on its length as well as its workers:
comparing one process with two at the same passes per thread keeps that
part equal, and the printed ramp (drain time minus bound) shows it. While a
drain runs, a client sends ``POST …/assemble`` at 20 requests/s over real
HTTP to an ``lcm api`` process on the same database and records its latency.

The reference in the same run (``bench/celery_floor.py``): Celery alone,
with the same threads and settings, draining as many tasks as the drain
that only wait as long as the model, then tasks that also burn as much CPU
as the workers spent per pass. The first says what the queue costs, the
second what a pass's CPU costs on this machine whatever it is spent on.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from pathlib import Path

import httpx
from sqlalchemy import func, select

from bench import celery_floor
from bench.deployment import spawn, wait_ready
from bench.machine import machine_busy, process_cpu
from bench.servers import postgres
from lcm.compaction.service import record_debt
from lcm.content import IncomingMessage
from lcm.db.engine import Database
from lcm.db.models import CompactionDebt
from lcm.ingest.service import ingest_messages, prepare_batch
from lcm.settings import Settings
from lcm.tenants.service import create_tenant
from tests import servers
from tests.fakes import FakeAnthropicServer

WAVES = 8  # passes per thread in the drains compared across process counts
LATENCY = 1.0
# (worker processes, passes per thread): the last is the short drain first reported.
DRAINS = ((1, WAVES), (2, WAVES), (2, WAVES // 2))
LOOP = {
    "LCM_FRESH_TAIL_COUNT": "4",
    "LCM_LEAF_MIN_FANOUT": "4",
    "LCM_LEAF_CHUNK_TOKENS": "2000",
    "LCM_LLM_MAX_RETRIES": "0",
    "ANTHROPIC_API_KEY": "sk-bench",
}


def _seed(db: Database, tenant_ids: list[str], round_: str, count: int) -> list[int]:
    """``count`` conversations of 8 messages: one leaf pass of 4 leaves the fresh tail of 4.

    Spread round-robin over ``tenant_ids``.
    """
    ids = []
    for n in range(count):
        tenant_id = tenant_ids[n % len(tenant_ids)]
        batch = [
            IncomingMessage(
                "user" if i % 2 == 0 else "assistant",
                f"step {i}: edited lib/module_{n}.py and reran the suite " * 4,
            )
            for i in range(8)
        ]
        with db.transaction() as s:
            cid = ingest_messages(
                s,
                tenant_id,
                f"r{round_}-c{n}",
                None,
                prepare_batch(batch, max_batch=10, max_chars=10**6),
            ).conversation_id
            record_debt(s, tenant_id, cid, "threshold", 400)
        ids.append(cid)
    return ids


def _outstanding(db: Database, ids: list[int]) -> int:
    with db.session() as s:
        return int(
            s.scalar(
                select(func.count())
                .select_from(CompactionDebt)
                .where(CompactionDebt.conversation_id.in_(ids), CompactionDebt.status != "done")
            )
            or 0
        )


ASSEMBLE_RATE = 20.0  # requests per second: a gateway's turns, not a closed-loop hammer


def _assemble_load(
    base: str, key: str, keys: list[str], stop: threading.Event, out: list[float]
) -> None:
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}) as client:
        n = 0
        next_at = time.perf_counter()
        while not stop.is_set():
            started = time.perf_counter()
            try:
                r = client.post(
                    f"/v1/conversations/{keys[n % len(keys)]}/assemble",
                    json={"token_budget": 4000},
                )
            except httpx.TransportError:
                r = None  # a keep-alive connection the server closed: not a latency sample
            if r is not None and r.status_code == 200:
                out.append((time.perf_counter() - started) * 1000)
            n += 1
            next_at += 1 / ASSEMBLE_RATE
            stop.wait(max(0.0, next_at - time.perf_counter()))


def run(args: argparse.Namespace) -> None:
    concurrency = args.drain_concurrency
    workdir = servers.make_workdir()
    redis_handle = servers.start_redis(workdir)
    with postgres() as url, FakeAnthropicServer(default=f"latency:{LATENCY}") as llm:
        env = {
            "LCM_DATABASE_URL": url,
            "LCM_BROKER_URL": redis_handle.url,
            "LCM_RESULT_BACKEND_URL": redis_handle.url,
            "LCM_ANTHROPIC_BASE_URL": llm.base_url,
            **LOOP,
        }
        settings = Settings(
            database_url=url, broker_url=redis_handle.url, result_backend_url=redis_handle.url
        )
        from workers.bootstrap import bootstrap
        from workers.sender import wake

        bootstrap(settings)
        db = Database(settings)
        with db.transaction() as s:
            issued = create_tenant(s, "bench")
            others = [
                create_tenant(s, f"bench-{n}").tenant_id for n in range(1, args.drain_tenants)
            ]
        tenant_ids = [issued.tenant_id, *others]
        port = servers.free_port()
        api_log = Path(workdir) / "api.log"
        api = spawn(["cli.main", "api", "--port", str(port)], env, api_log, Path(workdir))
        base = f"http://127.0.0.1:{port}"
        try:
            wait_ready(base, [api], api_log)
            for processes, waves in DRAINS:
                conversations = waves * concurrency * processes
                round_ = f"{processes}x{waves}"
                ids = _seed(db, tenant_ids, round_, conversations)
                # `lcm worker`, as operators start it (its flags are part of
                # what a pass costs: it once sent task events nobody watched).
                workers = [
                    spawn(
                        [
                            "cli.main",
                            "worker",
                            f"--concurrency={concurrency}",
                            f"--hostname=drain{round_}-{i}@%h",
                        ],
                        {**env, "LCM_DB_POOL_SIZE": str(concurrency)},
                        Path(workdir) / f"w{round_}-{i}.log",
                        Path(workdir),
                    )
                    for i in range(processes)
                ]
                # The clock starts once every worker is ready (connected, job
                # runner built): under load a fixed pause was too short, and
                # the drain time then included a worker's start-up.
                _wait_ready([Path(workdir) / f"w{round_}-{i}.log" for i in range(processes)])
                latencies: list[float] = []
                stop = threading.Event()
                # The first tenant's conversations (the key the load sends is its own).
                keys = [f"r{round_}-c{n}" for n in range(0, conversations, len(tenant_ids))]
                load = threading.Thread(
                    target=_assemble_load, args=(base, issued.api_key, keys, stop, latencies)
                )
                busy_before, total_before = machine_busy()
                cpu_before = sum(process_cpu(w.pid) for w in workers)
                started = time.perf_counter()
                for cid in ids:
                    wake(cid)
                load.start()
                while _outstanding(db, ids):
                    time.sleep(0.05)
                elapsed = time.perf_counter() - started
                worker_cpu = sum(process_cpu(w.pid) for w in workers) - cpu_before
                busy_after, total_after = machine_busy()
                machine = (busy_after - busy_before) / max(total_after - total_before, 1e-9)
                stop.set()
                load.join()
                for w in workers:
                    w.terminate()
                    w.wait(20)
                bound = conversations * LATENCY / (concurrency * processes)
                p50 = statistics.median(latencies) if latencies else float("nan")
                # Under 100 samples (the short two-process drain) a p99 is the maximum.
                p99 = (
                    statistics.quantiles(latencies, n=100)[98]
                    if len(latencies) >= 100
                    else max(latencies, default=float("nan"))
                )
                per_pass = worker_cpu * 1000 / conversations
                print(
                    f"  {len(tenant_ids)} tenant(s), {processes} worker process(es) x "
                    f"{concurrency} threads: drained "
                    f"{conversations} in {elapsed:5.1f} s; bound {bound:4.1f} s; efficiency "
                    f"{bound / elapsed:5.1%} (ramp {elapsed - bound:.2f} s); assemble over HTTP "
                    f"p50 {p50:.1f} ms, p99 {p99:.1f} ms ({len(latencies)} requests); worker CPU "
                    f"{per_pass:.0f} ms per pass, machine CPU "
                    f"{machine:.0%} busy",
                    flush=True,
                )
                _floor(
                    redis_handle.url, processes, concurrency, conversations, per_pass, Path(workdir)
                )
        finally:
            api.terminate()
            api.wait(20)
            db.dispose()
            redis_handle.stop()


def _floor(
    broker_url: str, processes: int, threads: int, tasks: int, cpu_ms: float, logs: Path
) -> None:
    """The reference: Celery alone with these threads, tasks of the model's wait (and CPU)."""
    bound = tasks * LATENCY / (threads * processes)
    figures = []
    for cpu in (0.0, cpu_ms):
        seconds = celery_floor.drain_seconds(broker_url, processes, threads, tasks, cpu, logs)
        figures.append(f"{cpu:.0f} ms of CPU per task {bound / seconds:5.1%}")
    print(
        f"    reference, Celery alone with the same threads and settings: {'; '.join(figures)}",
        flush=True,
    )


def _wait_ready(logs: list[Path], timeout: float = 120.0) -> None:
    """Wait until each worker's log says it is ready (``celery worker`` logs `` ready.``)."""
    deadline = time.monotonic() + timeout
    for log in logs:
        while " ready." not in (log.read_text(errors="replace") if log.exists() else ""):
            if time.monotonic() > deadline:
                raise RuntimeError(f"worker not ready: {log}")
            time.sleep(0.1)

"""Resident memory after serving big histories: ``lcm api``, a Celery worker, ``lcm serve``.

``lcm api`` and a worker (thread pool, 4 threads; the offline summarizer,
as no model key is set) run against the growth run's Postgres, with a
private Redis as the broker; with ``--embedded``, ``lcm serve`` runs on the
run's SQLite home instead. The API assembles ``CONVERSATIONS`` raw
conversations of ``PER_CONVERSATION`` messages each at a 100k-token budget
(five times the views the message cache may hold, ``LCM_MESSAGE_CACHE_SIZE``)
and greps each one; then the worker compacts ``COMPACTED`` of them
(``POST …/compact``, waiting until none owes a pass). The
figures are each process's resident set (``VmRSS``) and its peak (``VmHWM``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from bench.deployment import spawn, stop, wait_ready
from bench.growth_seed import Seeder
from lcm.settings import Settings
from lcm_client import LcmClient
from lcm_client.models import AssembleIn, CompactIn, GrepIn
from tests import servers

CONVERSATIONS = 100
PER_CONVERSATION = 1_000
COMPACTED = 20


def memory_mb(pid: int) -> tuple[float, float]:
    """A process's resident set and its peak, in MiB (Linux ``/proc``)."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def _print(name: str, pid: int) -> None:
    rss, peak = memory_mb(pid)
    print(f"  {name:<46} resident {rss:6.0f} MiB, peak {peak:6.0f} MiB", flush=True)


Seed = Callable[[Callable[[Seeder], object], bool], float]


def _conversations(seed: Seed) -> list[str]:
    keys = [f"memory-{n}" for n in range(CONVERSATIONS)]
    seconds = seed(lambda seeder: seeder.raw(keys, PER_CONVERSATION), False)
    print(f"  memory: {CONVERSATIONS} x {PER_CONVERSATION:,} messages written in {seconds:.0f} s")
    return keys


def _read_all(lcm: LcmClient, keys: list[str]) -> None:
    """Assemble each conversation whole (every message's view built) and grep it."""
    for key in keys:
        lcm.assemble(key, AssembleIn(token_budget=100_000))
        lcm.grep(GrepIn(pattern="payments rollback", mode="full_text", session_key=key))


def _compact(lcm: LcmClient, keys: list[str]) -> int:
    """Compact ``keys`` and wait until none owes a pass; the summaries they hold then."""
    for key in keys:
        lcm.compact(key, CompactIn(wait=False))
    _drain(lcm, keys)
    return sum(sum(lcm.status(k).summaries.values()) for k in keys)


def report_memory(seed: Seed, api_key: str, url: str) -> None:
    """``lcm api`` and a worker on Postgres: start, drive, print their memory, stop."""
    keys = _conversations(seed)
    workdir = servers.make_workdir()
    redis = servers.start_redis(workdir)
    env = {
        "LCM_DATABASE_URL": url,
        "LCM_BROKER_URL": redis.url,
        "LCM_LOG_LEVEL": "WARNING",
        "ANTHROPIC_API_KEY": "",
    }
    port = servers.free_port()
    log = workdir / "api.log"
    api = spawn(["cli.main", "api", "--host", "127.0.0.1", "--port", str(port)], env, log, workdir)
    worker = servers.start_celery_worker(env, hostname="growth", log=workdir / "worker.log")
    base = f"http://127.0.0.1:{port}"
    cache = Settings(database_url=url).message_cache_size
    try:
        wait_ready(base, [api], log, "/healthz")
        _print("lcm api, started", api.pid)
        _print("worker, started", worker.pid)
        with LcmClient(base, api_key) as lcm:
            _read_all(lcm, keys)
            views = CONVERSATIONS * PER_CONVERSATION
            _print(f"lcm api, after {views:,} views (cache bound {cache:,})", api.pid)
            summaries = _compact(lcm, keys[:COMPACTED])
        _print(f"worker, after {COMPACTED} compactions ({summaries} summaries)", worker.pid)
    finally:
        stop([api, worker])
        redis.stop()


def report_serve_memory(seed: Seed, api_key: str, home: Path) -> None:
    """``lcm serve`` (its in-process worker) on the embedded run's SQLite home."""
    keys = _conversations(seed)
    serve = servers.start_serve(
        {"LCM_HOME": str(home), "ANTHROPIC_API_KEY": "", "LCM_LOG_LEVEL": "WARNING"},
        log=home.parent / "serve.log",
    )
    cache = Settings(database_url=f"sqlite:///{home / 'lcm.db'}").message_cache_size
    try:
        pid = serve.process.pid
        _print("lcm serve, started", pid)
        with LcmClient(serve.base_url, api_key) as lcm:
            _read_all(lcm, keys)
            views = CONVERSATIONS * PER_CONVERSATION
            _print(f"lcm serve, after {views:,} views (cache bound {cache:,})", pid)
            summaries = _compact(lcm, keys[:COMPACTED])
        _print(f"lcm serve, after {COMPACTED} compactions ({summaries} summaries)", pid)
    finally:
        serve.stop()


def _drain(lcm: LcmClient, keys: list[str], timeout: float = 600) -> None:
    """Until no conversation in ``keys`` owes compaction (or ``timeout`` s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        debts = [lcm.status(k).debt or {} for k in keys]
        owing = [d for d in debts if d.get("status") in ("pending", "running")]
        if not owing:
            return
        time.sleep(1)
    print(f"  (compaction not drained in {timeout:.0f} s)", flush=True)

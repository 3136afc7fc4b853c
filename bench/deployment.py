"""The processes a gateway benchmark starts, and the CPU they use.

Postgres and Redis for the whole run (:func:`bench_servers`), then per
deployment a fresh database, ``lcm api``, ``lcm worker`` and ``lcm beat``
processes (:func:`lcm_deployment`), and :class:`CpuMeter` reading each
part's CPU from ``/proc``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
from psycopg import sql

from bench.machine import TICKS
from bench.servers import durable_postgres
from tests import servers

WORKER_THREADS = 16  # lcm worker's default LCM_WORKER_CONCURRENCY
# Compaction starts within a short run: a small fresh tail at a 24k budget.
DEPLOYMENT_ENV = {
    "LCM_FRESH_TAIL_COUNT": "16",
    "LCM_LOG_LEVEL": "WARNING",
    "ANTHROPIC_API_KEY": "sk-bench",
}


@dataclass(frozen=True)
class Shape:
    api_processes: int
    workers: int

    @property
    def label(self) -> str:
        return f"N={self.api_processes} M={self.workers}"


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


def spawn(args: list[str], env: dict[str, str], log: Path, cwd: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", *args],
            env={**os.environ, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
        )


def stop(processes: list[subprocess.Popen[bytes]]) -> None:
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


def wait_ready(
    base_url: str, processes: list[subprocess.Popen[bytes]], log: Path, path: str = "/readyz"
) -> None:
    """Until ``path`` answers 200; a process that exits meanwhile fails with its log's tail.

    Three minutes: on a host shared with other work, importing and starting
    an API process has taken over a minute.
    """
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in processes):
            raise RuntimeError(f"a process exited: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"{base_url}{path}", timeout=1).status_code == 200:
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
    api = spawn(
        ["cli.main", "api", "--host", "127.0.0.1", "--port", str(port),
         "--processes", str(shape.api_processes)],
        env, log, srv.workdir,
    )  # fmt: skip
    workers = [
        spawn(["cli.main", "worker", "--hostname", f"{tag}-w{i}@%h"], env, log, srv.workdir)
        for i in range(shape.workers)
    ]
    beat_dir = srv.workdir / f"{tag}-beat"
    beat_dir.mkdir(exist_ok=True)  # beat keeps its schedule file in its working directory
    beat = spawn(["cli.main", "beat"], env, log, beat_dir)
    processes = [api, *workers, beat]
    try:
        base = f"http://127.0.0.1:{port}"
        wait_ready(base, processes, log)
        yield base, {"api": [api.pid], "workers": [w.pid for w in workers], "beat": [beat.pid]}
    finally:
        stop(processes)


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


@contextmanager
def bench_servers() -> Iterator[Servers]:
    workdir = servers.make_workdir()
    redis = servers.start_redis(workdir)
    try:
        with durable_postgres(workdir) as handle:
            pid = redis.process.pid if redis.process is not None else None
            yield Servers(handle.admin_url, redis.url, workdir, pid)
    finally:
        redis.stop()

"""The drain's reference: what Celery itself reaches with the workers' settings.

A Celery app configured like ``workers.celery_app`` where it matters to a
drain (thread pool, ``acks_late``, prefetch 1, JSON, no task events), whose
one task waits as long as the fake model does and burns a given amount of
CPU around the wait, half before and half after, as a pass's claim and
commit do. ``bench drain`` runs it with the same threads and worker
processes as the real drain, once with no CPU and once with the CPU the real
workers spent per pass: the efficiency a drain can reach on this machine
with that much work per pass, measured in the same run.

The worker processes load this module (``celery -A bench.celery_floor``);
the broker URL, the wait and the CPU come from the environment.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import redis
from celery import Celery
from kombu import Exchange, Queue

QUEUE = "floor"
DONE_KEY = "bench:floor:done"
LATENCY = 1.0  # the fake model's, as in bench/drain.py

app = Celery("floor", broker=os.environ.get("FLOOR_BROKER_URL", "memory://"))
app.conf.update(
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    task_serializer="json",
    accept_content=["json"],
    worker_send_task_events=False,
    task_queues=[Queue(QUEUE, Exchange(QUEUE), routing_key=QUEUE)],
    task_default_queue=QUEUE,
    worker_hijack_root_logger=False,
)

_done: redis.Redis | None = None


def _burn(seconds: float) -> None:
    """Hold the CPU (and the GIL, as Python code does) for ``seconds`` of CPU time."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


@app.task(name="floor.pass", ignore_result=True)
def floor_pass() -> None:
    """A pass without the pass: CPU, the model's wait, CPU; then counted as done."""
    global _done
    cpu = float(os.environ.get("FLOOR_CPU_MS", "0")) / 2000
    _burn(cpu)
    time.sleep(float(os.environ.get("FLOOR_LATENCY", "1.0")))
    _burn(cpu)
    if _done is None:
        _done = redis.Redis.from_url(os.environ["FLOOR_BROKER_URL"])
    _done.incr(DONE_KEY)


def drain_seconds(
    broker_url: str, processes: int, threads: int, tasks: int, cpu_ms: float, logs: Path
) -> float:
    """Start ``processes`` workers of this app, send ``tasks`` tasks, time until all are done.

    The clock starts once every worker is ready, as the real drain's does.
    """
    env = {
        **os.environ,
        "FLOOR_BROKER_URL": broker_url,
        "FLOOR_CPU_MS": str(cpu_ms),
        "FLOOR_LATENCY": str(LATENCY),
    }
    counter = redis.Redis.from_url(broker_url)
    counter.set(DONE_KEY, 0)
    stamp = f"{cpu_ms:g}-{processes}"
    paths = [logs / f"floor-{stamp}-{i}.log" for i in range(processes)]
    workers = []
    for i, path in enumerate(paths):
        with path.open("wb") as out:
            workers.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "celery",
                        "-A",
                        "bench.celery_floor",
                        "worker",
                        "--pool=threads",
                        f"--concurrency={threads}",
                        f"--queues={QUEUE}",
                        "--loglevel=WARNING",
                        f"--hostname=floor-{stamp}-{i}@%h",
                        "--without-mingle",
                        "--without-gossip",
                    ],
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            )
    try:
        app.conf.broker_url = broker_url
        _wait_ready(workers)
        started = time.perf_counter()
        for _ in range(tasks):
            floor_pass.apply_async(queue=QUEUE)
        while int(counter.get(DONE_KEY) or 0) < tasks:
            time.sleep(0.01)
        return time.perf_counter() - started
    finally:
        for worker in workers:
            worker.terminate()
            worker.wait(20)


def _wait_ready(workers: list[subprocess.Popen[bytes]]) -> None:
    """Until every worker answers a ping (they log at WARNING, so no 'ready' line)."""
    deadline = time.monotonic() + 120
    while len(app.control.ping(timeout=0.5) or []) < len(workers):
        if time.monotonic() > deadline or any(w.poll() is not None for w in workers):
            raise RuntimeError("the floor's workers did not start")

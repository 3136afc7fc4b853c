"""Waiting endpoints on an idle embedded service (issue: hardening).

``lcm serve`` with the offline summarizer (no ``ANTHROPIC_API_KEY``), one
small conversation already compacted, nothing else running. Timed over real
HTTP, one request at a time:

* ``POST /v1/expand-query`` (offline answer): the request waits for the
  ``expansion.query`` job on the in-process worker;
* ``POST …/compact {"wait": true}`` with nothing left to compact: the request
  waits for a compaction job to claim, find nothing and settle the debt.

The reference is ``GET …/status`` on the same server: the same HTTP,
authentication and database reads with no job to wait for, i.e. the floor.
``--waits-source DIR`` runs the server from another source tree (e.g.
``git archive <commit> | tar -x -C DIR``) to measure a "before" figure.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from lcm.db.engine import Database
from lcm.db.migrate import upgrade
from lcm.settings import Settings
from lcm.tenants.service import create_tenant
from tests import servers

LOOP = {
    "LCM_FRESH_TAIL_COUNT": "4",
    "LCM_LEAF_MIN_FANOUT": "4",
    "LCM_LEAF_CHUNK_TOKENS": "400",
    "ANTHROPIC_API_KEY": "",
}


def run(args: argparse.Namespace) -> None:
    workdir = servers.make_workdir()
    home = workdir / "home"
    home.mkdir()
    url = f"sqlite:///{home / 'lcm.db'}"
    upgrade(url)
    database = Database(Settings(database_url=url))
    with database.transaction() as session:
        key = create_tenant(session, "bench").api_key
    database.dispose()
    source = Path(args.waits_source) if args.waits_source else None
    serve = servers.start_serve(
        {**LOOP, "LCM_HOME": str(home)}, log=workdir / "serve.log", cwd=source
    )
    try:
        _measure(serve.base_url, {"Authorization": f"Bearer {key}"}, args.repeat * 4)
    finally:
        serve.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def _measure(base: str, headers: dict[str, str], n: int) -> None:
    with httpx.Client(base_url=base, headers=headers, timeout=60) as http:
        messages = [
            {"role": "user" if i % 2 == 0 else "assistant", "content": f"step {i}: " + "ok " * 80}
            for i in range(24)
        ]
        http.post("/v1/conversations/bench/messages", json={"messages": messages})
        http.post("/v1/conversations/bench/compact", json={"wait": 30, "token_budget": 2000})
        timed = {
            "status (reference)": lambda: http.get("/v1/conversations/bench/status"),
            "expand-query offline": lambda: http.post(
                "/v1/expand-query",
                json={"prompt": "what was run?", "query": "step", "session_key": "bench"},
            ),
            "compact wait (idle)": lambda: http.post(
                "/v1/conversations/bench/compact", json={"wait": True}
            ),
        }
        for name, call in timed.items():
            p50, p90 = _percentiles(call, n)
            print(f"{name:<24} p50 {p50 * 1000:7.1f} ms   p90 {p90 * 1000:7.1f} ms   (n={n})")


def _percentiles(call: Callable[[], httpx.Response], n: int) -> tuple[float, float]:
    call().raise_for_status()  # warm-up (first use builds the job runner)
    times = []
    for _ in range(n):
        started = time.perf_counter()
        call().raise_for_status()
        times.append(time.perf_counter() - started)
    cuts = statistics.quantiles(times, n=10)
    return statistics.median(times), cuts[-1]

"""Assemble over HTTP, as a gateway sees it, against the same assembly in-process.

An ``lcm api`` process on Postgres (fsync on) serves ``POST …/assemble`` for
a never-compacted 20,000-message conversation at a 100k-token budget and for
a compacted one (~100 context items) at 200k, one request at a time through
``lcm_client``. In the same run: the same assembly called in-process (what
HTTP, auth and JSON add is the difference) and ``GET /healthz`` (the HTTP
round trip's floor).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import httpx

from bench.compaction import _assembly, _raw_conversation, build_history
from bench.deployment import spawn, wait_ready
from bench.servers import postgres
from lcm.compaction.repository import CompactionRepository
from lcm.db.engine import Database
from lcm.settings import Settings
from lcm.tenants.service import create_tenant
from lcm_client import LcmClient
from lcm_client.models import AssembleIn
from tests import servers

REQUESTS = 40


def _p50(call: Callable[[], object], n: int = REQUESTS) -> float:
    call()  # warm: connection, caches
    times = []
    for _ in range(n):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def run(args: argparse.Namespace) -> None:
    with postgres() as url:
        settings = Settings(database_url=url)
        db = Database(settings)
        with db.transaction() as s:
            issued = create_tenant(s, "bench")
        raw = _raw_conversation(db, issued.tenant_id, 20_000)
        compacted = build_history(db, issued.tenant_id, "compacted", 4_000, raw_tail=92)
        with db.session() as s:
            items = len(CompactionRepository(s).load_entries(compacted))
        port = servers.free_port()
        log = Path(servers.make_workdir()) / "api.log"
        api = spawn(
            ["cli.main", "api", "--host", "127.0.0.1", "--port", str(port)],
            {"LCM_DATABASE_URL": url, "LCM_LOG_LEVEL": "WARNING"},
            log,
            log.parent,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            # No broker here: alive is enough (``/readyz`` also asks for one).
            wait_ready(base, [api], log, "/healthz")
            with LcmClient(base, issued.api_key) as lcm, httpx.Client(base_url=base) as plain:
                floor = _p50(lambda: plain.get("/healthz"))
                cases = (
                    ("raw-20k", raw, 100_000, "20,000 raw messages, budget 100,000"),
                    ("compacted", compacted, 200_000, f"compacted ({items} items), budget 200,000"),
                )
                for key, cid, budget, label in cases:
                    body = AssembleIn(token_budget=budget)
                    over_http = _p50(partial(lcm.assemble, key, body))
                    in_process = statistics.median(
                        _assembly(db, settings, cid, budget, args.repeat * 4)
                    )
                    print(
                        f"  {label}: over HTTP p50 {over_http:5.1f} ms; in-process "
                        f"{in_process:5.1f} ms; GET /healthz p50 {floor:4.1f} ms",
                        flush=True,
                    )
        finally:
            api.terminate()
            api.wait(20)
            db.dispose()

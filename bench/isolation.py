"""One tenant's heavy work against another tenant's latency, ``lcm serve`` on SQLite.

A fresh ``lcm serve`` (embedded: SQLite file, in-process worker, offline
summarizer) with tenants A and B. Tenant B runs a loop of one-message ingests
(``POST …/messages``) alternating with status reads (``GET …/status``), one
at a time, first with nothing else running (the reference), then while
tenant A runs each heavy scenario:

* one bootstrap of a ~10 MB pi session (``--isolation-mb``);
* three concurrent bootstraps of ``--isolation-messages`` short messages each
  (60,000 by default, as in the issue: ~14 MB each, under the 16 MB body limit);
* ``--isolation-grep-rounds`` rounds of 48 concurrent regex greps over a
  2,000-message conversation of A's.

The 10 MB bootstrap is timed twice at the start (into an empty database,
then into one of ~60 MB); after the heavy scenarios the database is filled
with more such bootstraps to ``--isolation-grow-mb`` (1 GB by default), and
the bootstrap is timed ``--isolation-bootstraps`` more times there, B
sampled during each, to show whether its time stays flat as the file grows;
last, B's loop runs idle once more (the rows the worker still owes to the
search index and to compaction are printed before it). Printed per scenario
and request kind: p50, p99, max, count and B's first request after the heavy work started.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from tests import servers

IDLE_SECONDS = 8.0
GREPS = 48
WORDS = ["deploy", "cache", "index", "shard", "replica", "ledger", "invoice", "queue", "lease"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--isolation-mb", type=float, default=10.0, help="size of the big bootstrap (MB)"
    )
    parser.add_argument(
        "--isolation-messages",
        type=int,
        default=60_000,
        help="messages (4 words each; 60,000 is ~14 MB) in each of the three concurrent bootstraps",
    )
    parser.add_argument(
        "--isolation-grep-rounds", type=int, default=2, help="rounds of 48 concurrent greps"
    )
    parser.add_argument(
        "--isolation-bootstraps",
        type=int,
        default=3,
        help="big bootstraps timed once the database reached --isolation-grow-mb",
    )
    parser.add_argument(
        "--isolation-grow-mb",
        type=float,
        default=1_000.0,
        help="the database file size (MB) the big bootstrap is timed at last",
    )


def pi_session(session: int, messages: int, words_per_message: int) -> str:
    """A pi v3 session JSONL (one branch): ``messages`` alternating user/assistant texts."""
    lines = [
        json.dumps(
            {
                "type": "session",
                "version": 3,
                "id": f"10000000-aaaa-4bbb-8ccc-{session:012d}",
                "timestamp": "2026-01-01T00:00:00.000Z",
                "cwd": "/srv/app",
            }
        )
    ]
    parent = None
    for n in range(messages):
        entry = f"e{n:07d}"
        text = " ".join(f"{WORDS[(n + k) % len(WORDS)]}{k % 97}" for k in range(words_per_message))
        lines.append(
            json.dumps(
                {
                    "type": "message",
                    "id": entry,
                    "parentId": parent,
                    "timestamp": f"2026-01-01T{n // 3600 % 24:02d}:{n // 60 % 60:02d}:"
                    f"{n % 60:02d}.000Z",
                    "message": {
                        "role": "user" if n % 2 == 0 else "assistant",
                        "content": [{"type": "text", "text": text}],
                    },
                }
            )
        )
        parent = entry
    return "\n".join(lines) + "\n"


def big_session(session: int, megabytes: float) -> str:
    """About ``megabytes`` MB of 300-word messages (~2.7 KB a line)."""
    return pi_session(session, int(megabytes * 1_000_000 / 2_730), 300)


@dataclass
class Samples:
    """B's latencies (seconds) per request kind, in arrival order."""

    seconds: dict[str, list[float]] = field(default_factory=lambda: {"ingest": [], "status": []})
    failures: int = 0

    def brief(self, kind: str) -> str:
        got = sorted(self.seconds[kind]) or [0.0]
        return f"{got[len(got) // 2] * 1000:.0f}/{got[-1] * 1000:.0f} ms"

    def line(self, label: str, kind: str) -> str:
        got = sorted(self.seconds[kind])
        if not got:
            return f"{label:<34} {kind:<7} no request answered"
        p50 = got[len(got) // 2]
        p99 = got[min(len(got) - 1, int(0.99 * len(got)))]
        first = self.seconds[kind][0]
        return (
            f"{label:<34} {kind:<7} p50 {p50 * 1000:7.0f} ms  p99 {p99 * 1000:7.0f} ms  "
            f"max {got[-1] * 1000:7.0f} ms  first {first * 1000:7.0f} ms  n={len(got)}"
        )


class TenantB:
    """Tenant B's loop: a one-message ingest, then a status read, one at a time."""

    def __init__(self, base: str, key: str) -> None:
        self.http = httpx.Client(
            base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=600
        )
        self.n = 0
        seeded = self.http.post(
            "/v1/conversations/b-main/messages",
            json={"messages": [{"role": "user", "content": f"ledger {i}"} for i in range(50)]},
        )
        seeded.raise_for_status()

    def sample_while(self, busy: Callable[[], bool]) -> Samples:
        samples = Samples()
        while busy():
            self.n += 1
            body = {"messages": [{"role": "user", "content": f"live {self.n}", "id": f"l{self.n}"}]}
            self._timed(samples, "ingest", "POST", "/v1/conversations/b-main/messages", body)
            self._timed(samples, "status", "GET", "/v1/conversations/b-main/status", None)
        return samples

    def _timed(
        self, samples: Samples, kind: str, method: str, path: str, body: dict[str, Any] | None
    ) -> None:
        started = time.perf_counter()
        response = self.http.request(method, path, json=body)
        samples.seconds[kind].append(time.perf_counter() - started)
        samples.failures += response.status_code != 200

    def during(self, heavy: Callable[[], Any]) -> tuple[Samples, Any, float]:
        """Sample while ``heavy`` runs in a thread; its result and wall time."""
        outcome: dict[str, Any] = {}

        def target() -> None:
            started = time.perf_counter()
            outcome["result"] = heavy()
            outcome["seconds"] = time.perf_counter() - started

        thread = threading.Thread(target=target)
        thread.start()
        samples = self.sample_while(thread.is_alive)
        thread.join()
        return samples, outcome.get("result"), outcome.get("seconds", 0.0)


def bootstrap(base: str, key: str, conversation: str, transcript: str) -> str:
    """One bootstrap; ``"<status> <imported>"``."""
    with httpx.Client(
        base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=1200
    ) as http:
        r = http.post(
            f"/v1/conversations/{conversation}/bootstrap", json={"transcript_jsonl": transcript}
        )
    if r.status_code != 200:
        return f"{r.status_code} {r.text[:200]}"
    return f"{r.status_code} imported={r.json().get('imported')}"


def greps(base: str, key: str, rounds: int) -> str:
    """``rounds`` x 48 concurrent regex greps over ``a-grep``; the status codes seen."""

    def one(_i: int) -> int:
        with httpx.Client(
            base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=600
        ) as c:
            return c.post(
                "/v1/grep",
                json={
                    "pattern": r"replica lag \d+7 ms",
                    "mode": "regex",
                    "session_key": "a-grep",
                    "limit": 200,
                },
            ).status_code

    codes: set[int] = set()
    with ThreadPoolExecutor(GREPS) as pool:
        for _ in range(rounds):
            codes |= set(pool.map(one, range(GREPS)))
    return f"codes {sorted(codes)}"


def main_mb(home: Path) -> float:
    main = home / "lcm.db"
    return main.stat().st_size / 1e6 if main.exists() else 0.0


def database_mb(home: Path) -> str:
    main = home / "lcm.db"
    wal = home / "lcm.db-wal"
    size = main.stat().st_size / 1e6 if main.exists() else 0.0
    wal_size = wal.stat().st_size / 1e6 if wal.exists() else 0.0
    return f"{size:.0f} MB (+ WAL {wal_size:.0f} MB)"


def owed(home: Path) -> tuple[int, int]:
    """Rows the in-process worker still owes: search indexing and compaction debts."""
    with sqlite3.connect(f"file:{home / 'lcm.db'}?mode=ro", uri=True, timeout=30) as db:
        backlog = db.execute("SELECT count(*) FROM search_backlog").fetchone()[0]
        debts = db.execute("SELECT count(*) FROM compaction_debt").fetchone()[0]
    return backlog, debts


def pending(home: Path) -> str:
    backlog, debts = owed(home)
    return f"search_backlog {backlog} rows, compaction_debt {debts} rows"


def settle(home: Path, timeout: float = 300.0) -> None:
    """Wait until the in-process worker owes nothing (so a timed bootstrap runs alone)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and owed(home) != (0, 0):
        time.sleep(1.0)


def run(args: argparse.Namespace) -> None:
    workdir = servers.make_workdir()
    home = workdir / "home"
    _, key_a = servers.embedded_home(home, "a")
    _, key_b = servers.embedded_home(home, "b")
    serve = servers.start_serve(
        {"LCM_HOME": str(home), "ANTHROPIC_API_KEY": "", "LCM_LOG_LEVEL": "WARNING"},
        log=workdir / "serve.log",
    )
    try:
        _scenarios(args, serve.base_url, key_a, key_b, home)
    finally:
        serve.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def _scenarios(args: argparse.Namespace, base: str, key_a: str, key_b: str, home: Path) -> None:
    b = TenantB(base, key_b)
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key_a}"}) as a:
        for batch in range(4):  # the greps' history, as tests/e2e/test_embedded_isolation.py
            a.post(
                "/v1/conversations/a-grep/messages",
                json={
                    "messages": [
                        {"role": "user", "content": f"shard {batch}-{i} replica lag {i * 7} ms"}
                        for i in range(500)
                    ]
                },
            ).raise_for_status()
    big = big_session(1, args.isolation_mb)
    small = [pi_session(100 + i, args.isolation_messages, 4) for i in range(3)]
    mb = len(big) / 1e6
    print(
        f"big bootstrap {mb:.1f} MB ({big.count(chr(10)) - 1} messages); concurrent ones "
        f"3 x {args.isolation_messages} messages ({len(small[0]) / 1e6:.1f} MB each)",
        flush=True,
    )
    deadline = time.monotonic() + IDLE_SECONDS
    reference = b.sample_while(lambda: time.monotonic() < deadline)
    rows: list[tuple[str, Samples]] = [("idle (reference)", reference)]
    growth: list[tuple[str, float, str]] = []

    for n in (1, 2):  # into an empty database, then into one of ~60 MB
        settle(home)
        before = database_mb(home)
        samples, result, seconds = b.during(
            partial(bootstrap, base, key_a, f"a-big-{n}", big_session(n, args.isolation_mb))
        )
        growth.append((before, seconds, f"{result}; B ingest p50/max {samples.brief('ingest')}"))
        rows.append((f"{mb:.0f} MB bootstrap #{n} ({seconds:.1f} s)", samples))
        print(f"  bootstrap #{n}: {result} in {seconds:.1f} s", flush=True)

    def three() -> list[str]:
        with ThreadPoolExecutor(3) as pool:
            return list(
                pool.map(lambda i: bootstrap(base, key_a, f"a-many-{i}", small[i]), range(3))
            )

    samples, result, seconds = b.during(three)
    rows.append((f"3 concurrent bootstraps ({seconds:.1f} s)", samples))
    print(f"  three bootstraps: {result} in {seconds:.1f} s", flush=True)

    rounds = args.isolation_grep_rounds
    samples, result, seconds = b.during(lambda: greps(base, key_a, rounds))
    rows.append((f"{rounds} x 48 regex greps ({seconds:.1f} s)", samples))
    print(f"  greps: {result} in {seconds:.1f} s", flush=True)

    n = 3
    while main_mb(home) < args.isolation_grow_mb:  # filler, not timed
        bootstrap(base, key_a, f"a-fill-{n}", big_session(n, args.isolation_mb))
        n += 1
    print(f"  filled to {database_mb(home)} with {n - 3} more bootstraps", flush=True)
    for _ in range(args.isolation_bootstraps):
        settle(home)
        before = database_mb(home)
        conversation = f"a-big-{n}"
        samples, result, seconds = b.during(
            partial(bootstrap, base, key_a, conversation, big_session(n, args.isolation_mb))
        )
        growth.append((before, seconds, f"{result}; B ingest p50/max {samples.brief('ingest')}"))
        rows.append((f"{mb:.0f} MB bootstrap at {before.split()[0]} MB ({seconds:.1f} s)", samples))
        n += 1
    print(f"  before idle again: {pending(home)}", flush=True)
    after = time.monotonic() + IDLE_SECONDS
    rows.append(("idle again (after)", b.sample_while(lambda: time.monotonic() < after)))

    print(f"\ntenant B, one request at a time (failures: {sum(s.failures for _, s in rows)})")
    for label, got in rows:
        for kind in ("ingest", "status"):
            print(got.line(label, kind))
    print(f"\n{mb:.0f} MB bootstrap into a new conversation as the database grows")
    for n, (before, seconds, result) in enumerate(growth, 1):
        print(f"  #{n}: database before {before:<26} {seconds:6.1f} s  {result}")
    print(f"database after: {database_mb(home)}; {pending(home)}", flush=True)
    b.http.close()

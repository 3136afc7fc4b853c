"""Assemble over HTTP, as a gateway sees it, against the same assembly in-process.

An ``lcm api`` process on Postgres (fsync on) serves ``POST …/assemble`` for
a never-compacted 20,000-message conversation at a 100k-token budget and for
a compacted one (~100 context items) at 200k, one request at a time through
``lcm_client``. In the same run: the same assembly called in-process (what
HTTP, auth and JSON add is the difference) and ``GET /healthz`` (the HTTP
round trip's floor).

``--embedded``: the same against a fresh ``lcm serve`` (SQLite file,
in-process worker) once its search backlog is indexed, with the raw
conversation at a 20k budget too. With ``--against PATH`` (a checkout of
another commit), three rounds alternate this tree's server and that one's on
the same database: the before and after of a change, in one run.

The context does not change between requests, so after the first the
server's window cache (``lcm/window_cache.py``) answers: the figures are a
turn's repeated assembly. The in-process figure reads the window each time.
``--embedded`` adds a gateway's turn: one message ingested over HTTP, then
the assembly timed (the raw conversation at 100k), the window kept before
the ingest grown by the new item. With ``--against``, the database is taken
to each tree's schema before its server starts (the newer tree's migrations
go down to the older one's head, and up again).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import httpx
from alembic.config import Config
from alembic.script import ScriptDirectory

from bench.compaction import _assembly, _raw_conversation, build_history
from bench.deployment import spawn, wait_ready
from bench.servers import postgres
from lcm.compaction.repository import CompactionRepository
from lcm.db.engine import Database
from lcm.db.migrate import MIGRATIONS_DIR, downgrade, upgrade
from lcm.retrieval.search_backlog import index_search_backlog
from lcm.settings import Settings
from lcm.tenants.service import create_tenant
from lcm_client import LcmClient
from lcm_client.models import AssembleIn, MessageIn, MessagesIn
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


def _cpu_ms(pid: int) -> float:
    """The CPU time process ``pid`` has used (user + system), in ms (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def _server_p50(call: Callable[[], object], pid: int) -> tuple[float, float]:
    """p50 over HTTP and the server's mean CPU per request: on a busy machine the
    CPU time says what wall time, spent waiting for a core, does not."""
    call()
    before = _cpu_ms(pid)
    p50 = _p50(call)
    return p50, (_cpu_ms(pid) - before) / (REQUESTS + 1)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--embedded",
        action="store_true",
        help="hot_paths and gateway against a fresh lcm serve (SQLite) instead of lcm api "
        "on Postgres (gateway: against the reference on SQLite)",
    )


# Session key, conversation id, budget, label; AFTER_INGEST as the key's
# suffix: each assembly follows an ingest of one message (not timed).
Case = tuple[str, int, int, str]
AFTER_INGEST = "+ingest"


def _conversations(db: Database, tenant_id: str) -> tuple[int, int, int]:
    """The raw 20,000-message conversation, the compacted one and its item count."""
    raw = _raw_conversation(db, tenant_id, 20_000)
    compacted = build_history(db, tenant_id, "compacted", 4_000, raw_tail=92)
    with db.session() as s:
        items = len(CompactionRepository(s).load_entries(compacted))
    return raw, compacted, items


def _measure(
    base: str,
    key: str,
    db: Database,
    cases: list[Case],
    repeat: int,
    pid: int,
    in_process: bool = True,
) -> None:
    """Each case over HTTP (the server's CPU per request too) and in-process, with
    ``GET /healthz`` in the same run."""
    with LcmClient(base, key) as lcm, httpx.Client(base_url=base) as plain:
        floor, floor_cpu = _server_p50(lambda: plain.get("/healthz"), pid)
        for session_key, cid, budget, label in cases:
            body = AssembleIn(token_budget=budget)
            local = ""
            if session_key.endswith(AFTER_INGEST):
                key = session_key.removesuffix(AFTER_INGEST)
                over_http, cpu = _after_ingest_p50(lcm, key, body, pid)
            else:
                over_http, cpu = _server_p50(partial(lcm.assemble, session_key, body), pid)
            if in_process and not session_key.endswith(AFTER_INGEST):
                ms = statistics.median(_assembly(db, db.settings, cid, budget, repeat * 4))
                local = f"in-process {ms:5.1f} ms; "
            print(
                f"  {label}: over HTTP p50 {over_http:5.1f} ms (server CPU {cpu:4.1f} ms, "
                f"{over_http / floor:4.1f}x /healthz); {local}GET /healthz p50 {floor:4.1f} ms "
                f"(server CPU {floor_cpu:3.1f} ms)",
                flush=True,
            )


def _after_ingest_p50(lcm: LcmClient, key: str, body: AssembleIn, pid: int) -> tuple[float, float]:
    """A gateway's turn, repeated: one message ingested (not timed), then the assembly.

    p50 of the assembly over HTTP and the server's mean CPU per assembly."""
    times: list[float] = []
    cpu = 0.0
    for turn in range(REQUESTS + 1):
        said = MessageIn(role="user", content=f"turn {turn}: checked the build and the logs")
        lcm.ingest(key, MessagesIn(messages=[said]))
        before = _cpu_ms(pid)
        started = time.perf_counter()
        lcm.assemble(key, body)
        times.append((time.perf_counter() - started) * 1000)
        cpu += _cpu_ms(pid) - before
    return statistics.median(times[1:]), cpu / len(times)


def _schema_for(url: str, tree: Path | None) -> None:
    """The database at the schema of the tree about to serve it (None: this one).

    A tree whose head this one's history holds is taken down to it (``lcm
    serve`` there would not know the newer revision); this tree up to its own.
    """
    if tree is None:
        upgrade(url)
        return
    config = Config()
    config.set_main_option("script_location", str(tree / "lcm" / "db" / "migrations"))
    head = ScriptDirectory.from_config(config).get_current_head()
    ours = Config()
    ours.set_main_option("script_location", str(MIGRATIONS_DIR))
    known = {script.revision for script in ScriptDirectory.from_config(ours).walk_revisions()}
    if head in known:
        downgrade(url, head)


def run(args: argparse.Namespace) -> None:
    if args.embedded:
        _run_embedded(args)
        return
    with postgres() as url:
        settings = Settings(database_url=url)
        db = Database(settings)
        with db.transaction() as s:
            issued = create_tenant(s, "bench")
        raw, compacted, items = _conversations(db, issued.tenant_id)
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
            cases = [
                ("raw-20k", raw, 100_000, "20,000 raw messages, budget 100,000"),
                ("compacted", compacted, 200_000, f"compacted ({items} items), budget 200,000"),
            ]
            _measure(base, issued.api_key, db, cases, args.repeat, api.pid)
        finally:
            api.terminate()
            api.wait(20)
            db.dispose()


def _start_serve(home: Path, log: Path, tree: Path | None) -> servers.ServeHandle:
    """``lcm serve`` on ``home`` from ``tree`` (None: this one); tried twice, as a
    start on a busy machine can outlast the helper's minute."""
    env = {"LCM_HOME": str(home), "ANTHROPIC_API_KEY": "", "LCM_LOG_LEVEL": "WARNING"}
    try:
        return servers.start_serve(env, log=log, cwd=tree)
    except servers.ServerUnavailable:
        return servers.start_serve(env, log=log, cwd=tree)


def _run_embedded(args: argparse.Namespace) -> None:
    """A fresh ``lcm serve`` on a SQLite home the conversations were written into."""
    workdir = Path(servers.make_workdir())
    home = workdir / "home"
    home.mkdir()
    url = f"sqlite:///{home / 'lcm.db'}"
    upgrade(url)
    db = Database(Settings(database_url=url, broker_url="memory://"))
    try:
        with db.transaction() as s:
            issued = create_tenant(s, "bench")
        raw, compacted, items = _conversations(db, issued.tenant_id)
        index_search_backlog(db.transaction)  # what the fresh server would do first
        cases = [
            ("raw-20k", raw, 100_000, "20,000 raw messages, budget 100,000"),
            (
                "raw-20k" + AFTER_INGEST,
                raw,
                100_000,
                "20,000 raw messages, budget 100,000, first assembly after an ingest",
            ),
            ("raw-20k", raw, 20_000, "20,000 raw messages, budget 20,000"),
            ("compacted", compacted, 200_000, f"compacted ({items} items), budget 200,000"),
        ]
        against = getattr(args, "against", None)
        trees: list[tuple[str, Path | None]] = [("this tree", None)]
        if against:
            trees.append(("against", Path(against).resolve()))
        # With another tree, three rounds alternate the two servers (one at a
        # time, on the same database), so the machine's drift falls on both.
        for _ in range(3 if against else 1):
            for label, tree in trees:
                if against:
                    print(f"  {label}:", flush=True)
                _schema_for(url, tree)
                serve = _start_serve(home, workdir / "serve.log", tree)
                try:
                    pid = serve.process.pid
                    _measure(serve.base_url, issued.api_key, db, cases, args.repeat, pid, not tree)
                finally:
                    serve.stop()
    finally:
        db.dispose()

"""Postgres behind a pooler in transaction mode, and what server-side prepared statements cost.

* **What turning them off costs** (always runs): the same ingest of a turn's
  3-message batch, leaf pass (10k history) and assembly (20k raw messages)
  with ``LCM_DB_PREPARED_STATEMENTS`` on and off, alternating call by call
  in one process against one Postgres; the figure is the median of each
  pair's ratio (off over on).
* **Through PgBouncer** (when ``LCM_BENCH_PGBOUNCER`` names a ``pgbouncer``
  executable; it is not on PyPI): a PgBouncer in transaction mode with three
  server connections in front of a fresh database, the migrations run
  through it, then 8 threads x 60 turns (ingest, then assemble) with
  prepared statements on and then off. A pooler that does not track them
  (before 1.22, or ``max_prepared_statements = 0``) fails turns with them on.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from sqlalchemy.engine import make_url

from bench.compaction import BODY, InstantProvider, _analyze, _raw_conversation, build_history
from bench.servers import durable_postgres
from lcm.assembly.service import assemble
from lcm.compaction.engine import CompactionEngine
from lcm.compaction.sweep import next_pass
from lcm.content import IncomingMessage
from lcm.db.engine import Database
from lcm.db.migrate import upgrade
from lcm.ingest.service import ingest_messages, prepare_batch
from lcm.settings import Settings
from lcm.summarize.summarizer import Summarizer
from lcm.tenants.service import create_tenant
from tests import servers

PAIRS = 60
THREADS, TURNS = 8, 60


def run(args: argparse.Namespace) -> None:
    workdir = servers.make_workdir()
    try:
        with durable_postgres(workdir) as handle:
            upgrade(handle.url)
            _cost_of_turning_off(handle.url)
            binary = os.environ.get("LCM_BENCH_PGBOUNCER")
            if not binary:
                print("  through PgBouncer: not run (LCM_BENCH_PGBOUNCER names no pgbouncer)")
                return
            # A database of its own, migrated through the pooler.
            through = servers.with_database(handle.url, "lcm_pooler")
            with psycopg.connect(handle.admin_url, autocommit=True) as admin:
                admin.execute("DROP DATABASE IF EXISTS lcm_pooler WITH (FORCE)")
                admin.execute("CREATE DATABASE lcm_pooler")
            try:
                with _pgbouncer(binary, through, workdir) as via:
                    upgrade(via)
                    for prepared in (True, False):
                        _turns_through(via, prepared)
            finally:
                with psycopg.connect(handle.admin_url, autocommit=True) as admin:
                    admin.execute("DROP DATABASE IF EXISTS lcm_pooler WITH (FORCE)")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _ingest(db: Database, tenant_id: str, key: str, messages: list[IncomingMessage]) -> int:
    with db.transaction() as s:
        batch = prepare_batch(messages, max_batch=1000, max_chars=10**6)
        return ingest_messages(s, tenant_id, key, None, batch).conversation_id


def _timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def _paired(operation: Callable[[bool], float]) -> tuple[float, float]:
    """Median ms with them on, and the median of off/on over pairs taken in turn order."""
    for _ in range(5):  # warm both: connections, caches, psycopg's prepare threshold
        operation(True)
        operation(False)
    on, ratios = [], []
    for n in range(PAIRS):
        first = n % 2 == 0
        a = operation(first)
        b = operation(not first)
        with_on, with_off = (a, b) if first else (b, a)
        on.append(with_on * 1000)
        ratios.append(with_off / with_on)
    return statistics.median(on), statistics.median(ratios)


def _cost_of_turning_off(url: str) -> None:
    """Each operation alternately on a database with them on and one with them off."""
    dbs = {p: Database(Settings(database_url=url, db_prepared_statements=p)) for p in (True, False)}
    engines = {
        p: CompactionEngine(db.transaction, Summarizer(InstantProvider()), reads=db.lookup_session)
        for p, db in dbs.items()
    }
    with dbs[True].transaction() as s:
        tenant_id = create_tenant(s, "pooler").tenant_id
    histories = {p: build_history(dbs[True], tenant_id, f"history-{p}", 10_000) for p in dbs}
    raw = _raw_conversation(dbs[True], tenant_id, 20_000)
    _analyze(dbs[True])
    turn = [
        IncomingMessage("user", "run the tests"),
        IncomingMessage("assistant", BODY.format(i=0)),
        IncomingMessage("user", "thanks"),
    ]

    def ingest(p: bool) -> float:
        return _timed(lambda: _ingest(dbs[p], tenant_id, f"turns-{p}", turn))

    def leaf_pass(p: bool) -> float:
        new = [
            IncomingMessage("user" if i % 2 == 0 else "assistant", BODY.format(i=i))
            for i in range(120)
        ]
        _ingest(dbs[p], tenant_id, f"history-{p}", new)  # the debt the pass then pays, untimed

        def one_pass() -> None:
            plan = next_pass(engines[p].load(histories[p]), dbs[p].settings, 200_000)
            assert plan is not None
            assert plan.kind == "leaf"
            engines[p].run_pass(tenant_id, histories[p], plan, dbs[p].settings)

        return _timed(one_pass)

    def assembly(p: bool) -> float:
        def read() -> None:
            with dbs[p].snapshot_session() as s:
                assemble(s, raw, 100_000, dbs[p].settings)

        return _timed(read)

    print(f"  prepared statements off, time over on (median of {PAIRS} alternating pairs):")
    operations: list[tuple[str, Callable[[bool], float]]] = [
        ("ingest of a 3-message batch", ingest),
        ("leaf pass, 10k history", leaf_pass),
        ("assembly, 20k raw messages at 100k", assembly),
    ]
    for label, operation in operations:
        on, ratio = _paired(operation)
        print(f"    {label}: {ratio:.3f}x ({on:.2f} ms with them on)", flush=True)
    for db in dbs.values():
        db.dispose()


@contextmanager
def _pgbouncer(binary: str, url: str, workdir: Path) -> Iterator[str]:
    """A PgBouncer in transaction mode in front of ``url``'s server; yields its URL."""
    target = make_url(url)
    socket_dir = target.query.get("host")  # the embedded server listens on a socket only
    host = str(socket_dir) if socket_dir else (target.host or "127.0.0.1")
    port = servers.free_port()
    config = workdir / "pgbouncer.ini"
    config.write_text(
        "[databases]\n"
        f"* = host={host} port={target.port or 5432}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        "auth_type = trust\n"
        f"auth_file = {workdir / 'users.txt'}\n"
        "pool_mode = transaction\ndefault_pool_size = 3\nmax_client_conn = 200\n"
        f"logfile = {workdir / 'pgbouncer.log'}\n"
    )
    (workdir / "users.txt").write_text(f'"{target.username}" "{target.password or ""}"\n')
    command = [binary, str(config)]
    if os.geteuid() == 0:
        # PgBouncer refuses to run as root: it runs as nobody, who must reach
        # the server's socket directory and write its log.
        command[1:1] = ["-u", "nobody"]
        workdir.chmod(0o777)
        if socket_dir:
            Path(str(socket_dir)).chmod(0o711)
    process = subprocess.Popen(command)
    try:
        via = target.set(host="127.0.0.1", port=port, query={})
        rendered = via.render_as_string(hide_password=False)
        _wait_for(rendered)
        yield rendered
    finally:
        process.terminate()
        process.wait(10)


def _wait_for(url: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with psycopg.connect(url.replace("+psycopg", ""), connect_timeout=2) as conn:
                conn.execute("SELECT 1")
                return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _turns_through(url: str, prepared: bool) -> None:
    """THREADS x TURNS turns (ingest, then assemble) through the pooler; failures by kind."""
    db = Database(Settings(database_url=url, db_prepared_statements=prepared))
    with db.transaction() as s:
        tenant_id = create_tenant(s, f"through-{prepared}").tenant_id
    failures: Counter[str] = Counter()
    done = [0]
    lock = threading.Lock()

    def turns(n: int) -> None:
        for i in range(TURNS):
            said = [
                IncomingMessage("user", f"step {i}"),
                IncomingMessage("assistant", BODY.format(i=i)),
            ]
            try:
                cid = _ingest(db, tenant_id, f"c{n}", said)
                with db.snapshot_session() as s:
                    assemble(s, cid, 50_000, db.settings)
                with lock:
                    done[0] += 1
            except Exception as error:  # counted by kind: the figure is what fails
                # One line per kind of failure: numbers and statement names as N.
                kind = re.sub(r"(?<![A-Za-z])\d+", "N", str(error).splitlines()[0])[:120]
                with lock:
                    failures[kind] += 1

    threads = [threading.Thread(target=turns, args=(n,)) for n in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    db.dispose()
    state = "on" if prepared else "off (LCM_DB_PREPARED_STATEMENTS=false)"
    print(f"  through PgBouncer, prepared statements {state}: {done[0]} of {THREADS * TURNS} turns")
    for message, count in failures.most_common(4):
        print(f"    {count} x {message}")

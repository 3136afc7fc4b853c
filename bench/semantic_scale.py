"""Dense and hybrid grep at 100k and 1M vectors on Postgres: plans and latency.

``python -m bench semantic --scale 100k,1m``. The table is grown by
:mod:`bench.semantic_seed` (clustered vectors derived from real texts, several
tenants, conversations of 2,000 messages). At each size, for each scope grep
offers (one conversation, a tenant's whole history; messages, summaries,
both) and each mode (``semantic``, ``hybrid``): the statements one grep runs,
each under ``EXPLAIN (ANALYZE, BUFFERS)`` (``--plans``), then the p50/p95 of
the grep through the service (:func:`lcm.retrieval.grep.grep` in a read
session, as ``POST /v1/grep`` runs it; HTTP adds the API's own few ms), with
the query's embedding timed apart (the model runs in the process, ~5 ms idle).
"""

from __future__ import annotations

import json
import re
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event, text

from bench.semantic_seed import VectorLoad
from bench.servers import kept_postgres, postgres
from lcm.db.engine import Database
from lcm.retrieval.grep import GrepLimits, GrepQuery, grep
from lcm.retrieval.scope import ScopeSelector, resolve_bounds
from lcm.retrieval.semantic_grep import SemanticOptions
from lcm.semantic import load_embedder
from lcm.semantic.nearest_repository import ROWS_PER_SOURCE
from lcm.settings import Settings
from lcm.tenants.service import create_tenant

QUERIES = (
    "why did the build fail after the dependency upgrade",
    "where is the session file written on disk",
    "the test that times out on the CI machine",
    "rename the configuration option for the model provider",
    "what did we decide about retrying the request",
    "the terminal output is garbled after resizing",
)
HNSW = ("ix_embeddings_embedding_hnsw", "ix_embeddings_summary_hnsw")  # all; summaries alone
_VECTOR = re.compile(r"'\[[^\]]*\]'::vector")
_LIMIT = re.compile(r"LIMIT %\((\w+)\)s")
LIMITS = GrepLimits(30_000, 1_000, 168.0, SemanticOptions(True))  # the default handling


def run_scale(args: Any, sizes: list[int]) -> None:
    embedder = load_embedder()
    keep = Path(args.keep) if getattr(args, "keep", None) else None
    with kept_postgres(keep) if keep else postgres() as url:
        database = Database(Settings(database_url=url, semantic=True))
        load = _restored(database, keep, embedder) or _started(database, embedder)
        for size in sizes:
            if load.loaded >= size * 0.99:
                print(f"== {load.loaded:,} vectors (kept in {keep})", flush=True)
            else:
                with database.engine.begin() as conn:
                    load.conn = conn
                    timings = load.grow(size)
                _vacuum(database)
                _save(keep, load)
                steps = ", ".join(f"{k} {v:.0f} s" for k, v in timings.items())
                print(f"== {load.loaded:,} vectors ({steps})", flush=True)
            _measure(database, load, args)
        database.dispose()


def _vacuum(database: Database) -> None:
    """The tables the load wrote but ``bulk_load`` does not vacuum, as autovacuum
    would have by the time anyone greps: summaries' GIN pending list (rows inserted
    with the index in place) is otherwise read by every full-text search over them."""
    with database.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM (ANALYZE) summaries, embeddings"))


def _started(database: Database, embedder: Any) -> VectorLoad:
    with database.transaction() as session:
        tenants = [create_tenant(session, f"vec{i}").tenant_id for i in range(8)]
    with database.engine.begin() as conn:
        load = VectorLoad(conn, embedder, tenants)
        print(f"centres: {load.prepare():.1f} s to embed the real texts", flush=True)
    return load


_STATE = "semantic_scale.json"


def _save(keep: Path | None, load: VectorLoad) -> None:
    """What a kept data directory holds, written once its load has committed."""
    if keep is not None:
        state = {
            "tenants": load.tenants,
            "loaded": load.loaded,
            "conversations": load.conversations,
        }
        (keep / _STATE).write_text(json.dumps(state))


def _restored(database: Database, keep: Path | None, embedder: Any) -> VectorLoad | None:
    if keep is None or not (keep / _STATE).exists():
        return None
    state = json.loads((keep / _STATE).read_text())
    with database.engine.connect() as conn:
        load = VectorLoad(conn, embedder, state["tenants"], state["loaded"], state["conversations"])
    return load


def _scopes(load: VectorLoad) -> Iterator[tuple[str, str, ScopeSelector]]:
    big, small = load.tenants[0], load.tenants[-1]
    yield "conversation", big, ScopeSelector(conversation_id=load.conversations[big][0])
    yield "tenant 40%", big, ScopeSelector(all_conversations=True)
    yield "tenant 5%", small, ScopeSelector(all_conversations=True)


def _measure(database: Database, load: VectorLoad, args: Any) -> None:
    embedder = load_embedder()
    limit = args.grep_limit
    print(f"  each grep asks for {limit} matches", flush=True)
    embed = _timed(lambda i: embedder.embed([QUERIES[i % len(QUERIES)]]), args.repeat * 4)
    print(
        f"  query embedding alone: p50 {embed[0]:.1f} ms, p95 {embed[1]:.1f} ms "
        f"(CPU {embed[2]:.1f} ms)"
    )
    for label, tenant_id, selector in _scopes(load):
        for scope in ("messages", "summaries", "both"):
            for mode in ("semantic", "hybrid"):
                with database.read_session() as session:
                    bounds = resolve_bounds(session, tenant_id, selector)

                def once(i: int, mode: str = mode, scope: str = scope, bounds: Any = bounds) -> Any:
                    query = GrepQuery(QUERIES[i % len(QUERIES)], mode, scope, "relevance", limit)  # type: ignore[arg-type]
                    with database.read_session() as session:
                        return grep(session, bounds, query, LIMITS)

                if args.plans:
                    _explain(database, lambda: once(0), f"{label} / {scope} / {mode}")
                p50, p95, cpu = _timed(once, args.repeat * 4)
                print(
                    f"  {label:>12} {scope:>9} {mode:>8}: p50 {p50:6.1f} ms  p95 {p95:6.1f} ms"
                    f"  (CPU here {cpu:5.1f} ms)",
                    flush=True,
                )


def _timed(call: Callable[[int], object], runs: int) -> tuple[float, float, float]:
    """p50 and p95 wall time, and the p50 of this process's CPU time (all its threads:
    the model's included), in ms. On a busy host the wall time is mostly waiting."""
    call(0)  # warm-up: caches, the model's first run
    times, cpu = [], []
    for i in range(runs):
        started, used = time.perf_counter(), time.process_time()
        call(i + 1)
        times.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - used) * 1000)
    times.sort()
    p95 = times[min(len(times) - 1, int(len(times) * 0.95))]
    return statistics.median(times), p95, statistics.median(cpu)


@contextmanager
def captured(database: Database) -> Iterator[list[tuple[str, Any]]]:
    """The search statements run inside the block (embeddings, messages, summaries)."""
    seen: list[tuple[str, Any]] = []

    def listen(_conn: Any, _cursor: Any, statement: str, params: Any, *_rest: Any) -> None:
        head = statement.lstrip().upper()
        searched = any(s in statement for s in ("FROM embeddings", "ts_rank", "content_tsv @@"))
        if head.startswith("SELECT") and searched:
            seen.append((statement, params))

    event.listen(database.engine, "before_cursor_execute", listen)
    try:
        yield seen
    finally:
        event.remove(database.engine, "before_cursor_execute", listen)


def explain(database: Database, statement: str, params: Any) -> list[str]:
    """``EXPLAIN (ANALYZE, BUFFERS)`` of one captured statement, as grep's transaction runs it."""
    with database.engine.begin() as conn:
        conn.execute(text("SET LOCAL hnsw.iterative_scan = relaxed_order"))
        rows = conn.exec_driver_sql("EXPLAIN (ANALYZE, BUFFERS) " + statement, params)
        return [r[0] for r in rows]


def as_read(statement: str, params: Any) -> Any:
    """The dense statement's parameters as its cursor reads it: ``EXPLAIN ANALYZE``
    runs a statement to its ``LIMIT``, the cursor stops once it holds the texts it
    wants, which for the seeded vectors (one chunk a text) is the first
    ``1 / ROWS_PER_SOURCE`` of the limit. (An exact sort, read in one statement,
    sorts its whole scope either way: the smaller limit changes nothing there.)"""
    found = _LIMIT.search(statement)
    if "FROM embeddings" not in statement or found is None:
        return params
    key = found.group(1)
    return {**params, key: params[key] // ROWS_PER_SOURCE}


def _explain(database: Database, call: Callable[[], object], label: str) -> None:
    with captured(database) as seen:
        call()
    for statement, params in seen:
        plan = explain(database, statement, as_read(statement, params))
        kind = "dense, as read" if "embeddings" in statement else "full text"
        graphs = [name for name in HNSW if any(name in line for line in plan)]
        uses = f"walks {graphs[0]}" if graphs else "no HNSW"
        print(f"  -- plan: {label}: {kind} ({uses})")
        for line in plan:
            print("     " + _VECTOR.sub("'[384 floats]'::vector", line))

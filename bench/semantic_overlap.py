"""``python -m bench semantic --scale 1m --keep DIR --overlap-ab``: hybrid grep with
its query embedded beside the full-text statements (the service's way) against
the embedding done first (as before), alternated grep by grep in one process on
the same data, so both meet the same load. p50/p95 wall and the process's CPU
per grep (the model's included: the same work either way, only its timing moves).
"""

from __future__ import annotations

import statistics
import time
from concurrent.futures import Future
from typing import Any

from lcm.db.engine import Database
from lcm.retrieval import semantic_grep
from lcm.retrieval.grep import GrepQuery, grep
from lcm.retrieval.scope import resolve_bounds
from lcm.semantic import Embedder


def _first(embedder: Embedder, text: str) -> Future[Any]:
    """The vector computed now, on the grep's thread: the order before the overlap."""
    done: Future[Any] = Future()
    done.set_result(embedder.embed([text])[0])
    return done


def overlap_ab(
    database: Database, scopes: Any, queries: tuple[str, ...], limits: Any, runs: int
) -> None:
    beside = semantic_grep.embed_beside
    try:
        for label, tenant_id, selector in scopes:
            for target in ("messages", "summaries", "both"):
                with database.read_session() as session:
                    bounds = resolve_bounds(session, tenant_id, selector)
                seen: dict[str, tuple[list[float], list[float]]] = {
                    "beside": ([], []),
                    "first": ([], []),
                }
                for i in range(2 * runs + 2):  # the first pair warms up
                    kind = "beside" if i % 2 == 0 else "first"
                    semantic_grep.embed_beside = beside if kind == "beside" else _first
                    query = GrepQuery(
                        queries[(i // 2) % len(queries)], "hybrid", target, "relevance", 20
                    )
                    started, used = time.perf_counter(), time.process_time()
                    with database.read_session() as session:
                        grep(session, bounds, query, limits)
                    if i >= 2:
                        seen[kind][0].append((time.perf_counter() - started) * 1000)
                        seen[kind][1].append((time.process_time() - used) * 1000)
                print(
                    f"  {label:>12} {target:>9} hybrid  "
                    + "  |  ".join(_figures(k, *v) for k, v in seen.items()),
                    flush=True,
                )
    finally:
        semantic_grep.embed_beside = beside


def _figures(kind: str, wall: list[float], cpu: list[float]) -> str:
    wall.sort()
    p95 = wall[min(len(wall) - 1, int(len(wall) * 0.95))]
    p50, used = statistics.median(wall), statistics.median(cpu)
    return f"{kind}: p50 {p50:6.1f} ms, p95 {p95:6.1f} ms (CPU {used:5.1f} ms)"

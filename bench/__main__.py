"""Run benchmark scenarios: ``python -m bench`` (all) or ``python -m bench ingest``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from bench import (
    body_memory,
    compaction,
    console,
    cost,
    drain,
    erase,
    fair_choice,
    gateway,
    gateway_ab,
    grep,
    growth,
    hot_paths,
    ingest,
    isolation,
    plugin,
    pooler,
    recall,
    recall_floor,
    search_cost,
    search_lock,
    secrets,
    secrets_real,
    semantic,
    transcripts,
    waits,
)
from bench.machine import report_before

SCENARIOS: dict[str, Callable[[argparse.Namespace], None]] = {
    "ingest": ingest.run,
    "compaction": compaction.run,
    "drain": drain.run,
    "transcripts": transcripts.run,
    "grep": grep.run,
    "growth": growth.run,
    "waits": waits.run,
    "erase": erase.run,
    "fair_choice": fair_choice.run,
    "console": console.run,
    "gateway": gateway.run,
    "gateway_ab": gateway_ab.run,
    "search_cost": search_cost.run,
    "search_lock": search_lock.run,
    "hot_paths": hot_paths.run,
    "pooler": pooler.run,
    "plugin": plugin.run,
    "body_memory": body_memory.run,
    "isolation": isolation.run,
    "secrets": secrets.run,
    "semantic": semantic.run,
    "recall": recall.run,
    "recall_floor": recall_floor.run,
    "cost": cost.run,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("scenarios", nargs="*", choices=[*SCENARIOS, []], default=[])
    parser.add_argument("--repeat", type=int, default=5, help="runs per figure (median quoted)")
    parser.add_argument("--messages", type=int, default=20_000, help="messages per ingest run")
    parser.add_argument(
        "--grep-sizes",
        type=int,
        nargs="+",
        default=[20_000, 1_000_000],
        help="table sizes the grep scenario measures at (grown in order)",
    )
    parser.add_argument(
        "--sizes",
        default="1000,10000,100000",
        help="conversation lengths (messages) of the compaction and growth scenarios, "
        "comma-separated (growth also takes 1k, 1m)",
    )
    parser.add_argument(
        "--drain-concurrency", type=int, default=25, help="threads per worker process (drain)"
    )
    parser.add_argument(
        "--drain-tenants",
        type=int,
        default=1,
        help="tenants the drain's conversations are spread over (round-robin)",
    )
    parser.add_argument(
        "--waits-source",
        default=None,
        help="source tree the waits scenario runs lcm serve from (a before figure)",
    )
    parser.add_argument(
        "--plans",
        action="store_true",
        help="growth: print grep's query plans; semantic --scale: EXPLAIN (ANALYZE, BUFFERS) "
        "each search (Postgres)",
    )
    gateway.add_arguments(parser)
    gateway_ab.add_arguments(parser)
    plugin.add_arguments(parser)
    body_memory.add_arguments(parser)
    isolation.add_arguments(parser)
    hot_paths.add_arguments(parser)
    secrets_real.add_arguments(parser)
    semantic.add_arguments(parser)
    recall.add_arguments(parser)
    cost.add_arguments(parser)
    growth.add_arguments(parser)
    args = parser.parse_args(argv)
    for name in args.scenarios or list(SCENARIOS):
        print(f"== {name}", flush=True)
        print(report_before(), flush=True)
        SCENARIOS[name](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())

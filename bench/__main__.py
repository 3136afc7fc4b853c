"""Run benchmark scenarios: ``python -m bench`` (all) or ``python -m bench ingest``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from bench import ingest

SCENARIOS: dict[str, Callable[[argparse.Namespace], None]] = {
    "ingest": ingest.run,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("scenarios", nargs="*", choices=[*SCENARIOS, []], default=[])
    parser.add_argument("--repeat", type=int, default=5, help="runs per figure (median quoted)")
    parser.add_argument("--messages", type=int, default=20_000, help="messages per ingest run")
    args = parser.parse_args(argv)
    for name in args.scenarios or list(SCENARIOS):
        print(f"== {name}", flush=True)
        SCENARIOS[name](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())

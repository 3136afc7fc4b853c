"""``python -m bench``: every scenario's options live on one parser, so they must not clash.

Run as a user runs it, in its own process: importing the benchmarks here
would register their scratch Celery tasks on this process's app.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_bench_parser_builds_with_every_scenarios_options() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "bench", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    for option in ("--plans", "--scale", "--tables", "--embedded", "--seconds"):
        assert option in shown

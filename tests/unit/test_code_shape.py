"""House rules a linter does not check: functions stay short enough to read in one screen."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("lcm", "api", "workers", "cli", "lcm_client")
MAX_FUNCTION_LINES = 60  # docstring included; migrations are data, not logic


def test_functions_are_at_most_sixty_lines() -> None:
    long = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines = (node.end_lineno or node.lineno) - node.lineno + 1
                    if lines > MAX_FUNCTION_LINES:
                        long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines})")
    assert long == [], "split these functions:\n" + "\n".join(long)

"""The entry points' layers, read from the source: ``api/`` never imports ``workers/``,
and the domain ``lcm/`` never imports an entry point (``api``, ``workers``, ``cli``).

The API reaches the worker side through :class:`lcm.worker_link.WorkerLink`,
which the composition root hands it. Imports are read from the syntax tree,
lazy ones inside functions included, and so are module names passed as
strings to ``importlib.import_module`` / ``__import__``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
IMPORTERS = {"import_module", "__import__"}


def imported_modules(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """``(line, module)`` of every import in ``tree``, importlib-style strings included."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                yield node.lineno, node.module
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            first = node.args[0]
            text = first.value if isinstance(first, ast.Constant) else None
            if name in IMPORTERS and isinstance(text, str):
                yield node.lineno, text


def forbidden_imports(folder: str, banned: frozenset[str]) -> list[str]:
    found = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for line, module in imported_modules(tree):
            if module.split(".")[0] in banned:
                found.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    return found


def test_the_reader_sees_every_import_form() -> None:
    source = (
        "import workers.sender\n"
        "from workers import completions\n"
        "def f():\n"
        "    from workers.metrics import X\n"
        "    importlib.import_module('workers.runtime')\n"
        "    __import__('cli.main')\n"
        "from . import sibling\n"
    )
    found = [module for _, module in imported_modules(ast.parse(source))]
    assert found == [
        "workers.sender",
        "workers",
        "workers.metrics",
        "workers.runtime",
        "cli.main",
    ]


@pytest.mark.parametrize(
    ("folder", "banned"),
    [
        ("api", frozenset({"workers"})),
        ("lcm", frozenset({"api", "workers", "cli"})),
    ],
)
def test_layer_imports_nothing_above_or_beside_it(folder: str, banned: frozenset[str]) -> None:
    assert forbidden_imports(folder, banned) == []

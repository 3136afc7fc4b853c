"""The `lcm/` folders form a tree, not a web (read from the source, no imports run).

A unit is a folder under `lcm/` (`lcm.compaction`) or the ground: the modules
directly in `lcm/` (`settings`, `errors`, `tokens`, ...). The ground sits below
every folder and imports none of them. `lcm/services.py` is the composition
root: it builds every long-lived part, so it sits above everything and is left
out. Every import counts, including those inside functions and under
`TYPE_CHECKING`: a lazy import hides a cycle, it does not remove it.
"""

from __future__ import annotations

import ast
import itertools
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LCM = ROOT / "lcm"
GROUND = "lcm (ground)"
COMPOSITION_ROOT = LCM / "services.py"

# (importing unit, imported unit) -> the importing files, relative to the repository.
Edges = dict[tuple[str, str], set[str]]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _unit(module: str) -> str | None:
    """The unit a dotted module name belongs to; None outside `lcm`."""
    parts = module.split(".")
    if parts[0] != "lcm":
        return None
    if len(parts) == 1 or not (LCM / parts[1]).is_dir():
        return GROUND
    return f"lcm.{parts[1]}"


def _imported_modules(path: Path, text: str | None = None) -> set[str]:
    """Every module `path` imports (its source, or `text` in its place), absolute.

    `from lcm import x` counts as importing both `lcm` and `lcm.x`.
    """
    package = _module_name(path)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text() if text is None else text, str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def lcm_edges(root: Path = LCM) -> Edges:
    """Imports between units, with the files that make each one."""
    edges: Edges = defaultdict(set)
    for path in sorted(root.rglob("*.py")):
        if path == COMPOSITION_ROOT:
            continue
        source = _unit(_module_name(path))
        for module in _imported_modules(path):
            target = _unit(module)
            # `from lcm import x` where x is a ground module is found both as
            # `lcm` and `lcm.x`; both are the ground. The composition root is
            # above everything: importing it from below is a cycle by itself.
            if module == "lcm.services":
                target = "lcm.services"
            if target is not None and source is not None and target != source:
                edges[(source, target)].add(str(path.relative_to(ROOT)))
    return dict(edges)


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    stack = [start]
    while stack:
        for nxt in graph.get(stack.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


def _shortest_cycle(graph: dict[str, set[str]], start: str) -> list[str]:
    """The shortest path start -> ... -> start (breadth first)."""
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for nxt in sorted(graph.get(node, ())):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if nxt not in previous:
                    previous[nxt] = node
                    following.append(nxt)
        frontier = following
    return []


def find_cycles(edges: Edges) -> list[list[str]]:
    """One shortest cycle per strongly connected group of units, each group once."""
    graph: dict[str, set[str]] = defaultdict(set)
    for source, target in edges:
        graph[source].add(target)
    reach = {node: _reachable(graph, node) for node in list(graph)}
    cycles: list[list[str]] = []
    placed: set[str] = set()
    for node in sorted(reach):
        if node in placed or node not in reach[node]:
            continue
        group = {other for other in reach[node] if node in reach.get(other, set())}
        placed |= group
        cycles.append(_shortest_cycle(graph, node))
        # Every two-unit cycle in the group too: they are the usual culprits,
        # and naming them all at once saves a fix-and-rerun per pair.
        for source, target in sorted(edges):
            if (
                source in group
                and target in group
                and source < target
                and (target, source) in edges
            ):
                pair = [source, target, source]
                if pair != cycles[-1] and [target, source, target] != cycles[-1]:
                    cycles.append(pair)
    return cycles


def describe(cycle: list[str], edges: Edges) -> str:
    hops = [
        f"  {source} -> {target}: {', '.join(sorted(edges[(source, target)]))}"
        for source, target in itertools.pairwise(cycle)
    ]
    return " -> ".join(cycle) + "\n" + "\n".join(hops)


def test_no_import_cycle_between_lcm_folders() -> None:
    edges = lcm_edges()
    cycles = find_cycles(edges)
    assert not cycles, "import cycles between lcm/ folders:\n" + "\n".join(
        describe(cycle, edges) for cycle in cycles
    )


def test_ground_modules_import_no_folder() -> None:
    edges = lcm_edges()
    upward = {target: files for (source, target), files in edges.items() if source == GROUND}
    assert not upward, "ground modules in lcm/ import folders above them:\n" + "\n".join(
        f"  -> {target}: {', '.join(sorted(files))}" for target, files in sorted(upward.items())
    )


def test_cycle_finder_names_the_cycle_and_its_files() -> None:
    """The finder itself: a planted a -> b -> c -> a loop and a b <-> c pair."""
    edges: Edges = {
        ("lcm.a", "lcm.b"): {"lcm/a/x.py"},
        ("lcm.b", "lcm.c"): {"lcm/b/y.py"},
        ("lcm.c", "lcm.a"): {"lcm/c/z.py"},
        ("lcm.c", "lcm.b"): {"lcm/c/w.py"},
        ("lcm.c", "lcm.d"): {"lcm/c/v.py"},
    }
    cycles = find_cycles(edges)
    assert ["lcm.b", "lcm.c", "lcm.b"] in cycles
    assert any(len(cycle) == 4 and set(cycle) == {"lcm.a", "lcm.b", "lcm.c"} for cycle in cycles)
    assert "lcm/c/z.py" in describe(next(c for c in cycles if len(c) == 4), edges)
    assert not find_cycles({("lcm.a", "lcm.b"): {"x"}, ("lcm.b", "lcm.c"): {"y"}})


def test_relative_and_package_imports_are_resolved() -> None:
    """`from lcm import x` and relative imports land on the right unit."""
    assert _unit("lcm") == GROUND
    assert _unit("lcm.settings") == GROUND
    assert _unit("lcm.compaction.engine") == "lcm.compaction"
    assert _unit("api.app") is None
    here = LCM / "compaction" / "engine.py"
    assert "lcm.compaction.source" in _imported_modules(here, "from .source import x\n")
    assert "lcm.settings" in _imported_modules(here, "from ..settings import Settings\n")


if __name__ == "__main__":
    found = lcm_edges()
    for cycle in find_cycles(found):
        print(describe(cycle, found))
    for (source, target), files in sorted(found.items()):
        if source == GROUND:
            print("ground ->", target, sorted(files))

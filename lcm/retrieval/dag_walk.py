"""Walking the summary DAG downwards, in the order the history happened."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lcm.retrieval.repository import HistoryRepository

# Bounds the walk down a corrupt (cyclic) DAG; real depths are single digits.
MAX_DEPTH = 64


@dataclass(frozen=True, slots=True)
class DagWalk:
    """Every summary at or below the start ids, depth first, sources in order."""

    visited: list[str]
    leaves: list[str]
    sources: dict[str, list[str]]


def walk(repo: HistoryRepository, start_ids: Sequence[str]) -> DagWalk:
    """Load the DAG below ``start_ids`` (one query per level), then order it depth first.

    Sources are stored in order, so a depth-first walk visits leaves (and so
    messages) chronologically. A node reachable twice is visited once.
    """
    sources: dict[str, list[str]] = {}
    frontier, seen = list(dict.fromkeys(start_ids)), set(start_ids)
    for _ in range(MAX_DEPTH):
        if not frontier:
            break
        level = repo.sources_of(frontier)
        next_frontier = []
        for node in frontier:
            sources[node] = level.get(node, [])
            for parent in sources[node]:
                if parent not in seen:
                    seen.add(parent)
                    next_frontier.append(parent)
        frontier = next_frontier
    visited: list[str] = []
    leaves: list[str] = []
    done: set[str] = set()
    stack = list(reversed(list(dict.fromkeys(start_ids))))
    while stack:
        node = stack.pop()
        if node in done:
            continue
        done.add(node)
        visited.append(node)
        below = sources.get(node, [])
        if not below:
            leaves.append(node)
        stack.extend(reversed([p for p in below if p not in done]))
    return DagWalk(visited, leaves, sources)

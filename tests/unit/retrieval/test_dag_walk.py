"""The DAG walk orders leaves as the history happened, whatever the load order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from lcm.retrieval.dag_walk import walk
from lcm.retrieval.repository import HistoryRepository


class FakeSources:
    """Stands in for the repository: condensed summary -> its sources, in order."""

    def __init__(self, sources: dict[str, list[str]]) -> None:
        self.sources = sources
        self.queries = 0

    def sources_of(self, ids: Sequence[str]) -> dict[str, list[str]]:
        self.queries += 1
        return {i: self.sources[i] for i in ids if i in self.sources}


def test_leaves_come_out_depth_first_in_source_order() -> None:
    repo = FakeSources({"top": ["c1", "c2"], "c1": ["l1", "l2"], "c2": ["l3", "l4"]})
    result = walk(cast(HistoryRepository, cast(Any, repo)), ["top"])
    assert result.leaves == ["l1", "l2", "l3", "l4"]
    assert result.visited == ["top", "c1", "l1", "l2", "c2", "l3", "l4"]
    assert repo.queries == 3  # one query per level, not per node


def test_a_node_reached_twice_is_walked_once() -> None:
    repo = FakeSources({"a": ["l1", "l2"], "b": ["l2", "l3"]})
    result = walk(cast(HistoryRepository, cast(Any, repo)), ["a", "b", "a"])
    assert result.leaves == ["l1", "l2", "l3"]

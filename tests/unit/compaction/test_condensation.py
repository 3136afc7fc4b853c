"""Choosing the shallowest condensation candidate."""

from __future__ import annotations

import pytest

from lcm.compaction.planning import PassPlan, shallowest_condensation
from lcm.context import ContextEntry
from tests.unit.compaction.builders import Conversation, settings, summary_entry


def layout(*depths: int | None, tokens: int = 100) -> list[ContextEntry]:
    """Entries by depth; None is a raw message."""
    conv = Conversation()
    for i, depth in enumerate(depths):
        if depth is None:
            conv.user(f"m{i}", tokens=tokens)
        else:
            conv.entries.append(summary_entry(conv.next_ordinal, depth, tokens=tokens))
        conv.next_ordinal += 2
    return conv.entries


def condense(
    entries: list[ContextEntry], fanout: int = 4, max_depth: int | None = None, **kw: int
) -> PassPlan | None:
    return shallowest_condensation(
        entries, settings(**kw), fanout=fanout, max_result_depth=max_depth, phase="routine"
    )


def test_shallowest_depth_wins_over_an_older_deeper_run() -> None:
    entries = layout(1, 1, 1, 1, 0, 0, 0, 0, None)
    plan = condense(entries)
    assert plan is not None
    assert plan.entries == tuple(entries[4:8])
    assert (plan.kind, plan.depth, plan.phase) == ("condensed", 1, "routine")
    assert plan.summary_ids == tuple(e.summary.id for e in entries[4:8] if e.summary)


def test_oldest_run_wins_at_the_same_depth() -> None:
    entries = layout(0, 0, 1, 0, 0, 0)
    plan = condense(entries, fanout=2)
    assert plan is not None
    assert plan.entries == tuple(entries[:2])


def test_runs_must_be_contiguous_and_of_one_depth() -> None:
    entries = layout(0, 0, None, 0, 0, 1, 0)
    assert condense(entries, fanout=3) is None
    plan = condense(entries, fanout=2)
    assert plan is not None
    assert plan.entries == tuple(entries[:2])


def test_max_result_depth_bounds_the_depth_created() -> None:
    entries = layout(1, 1, 1, 1, 1)
    assert condense(entries, max_depth=1) is None
    plan = condense(entries, max_depth=2)
    assert plan is not None
    assert plan.depth == 2


def test_chunk_is_capped_by_tokens_but_keeps_the_fanout() -> None:
    entries = layout(*([0] * 10), tokens=100)
    plan = condense(entries, fanout=2, leaf_chunk_tokens=350)
    assert plan is not None
    assert len(plan.entries) == 3
    big = layout(*([0] * 10), tokens=1_000)
    plan = condense(big, fanout=2, leaf_chunk_tokens=350)
    assert plan is not None
    assert len(plan.entries) == 2


def test_whole_run_is_taken_when_it_fits() -> None:
    entries = layout(0, 0, 0, 0, 0, 0, None)
    plan = condense(entries)
    assert plan is not None
    assert len(plan.entries) == 6


def test_fanout_below_two_is_refused() -> None:
    with pytest.raises(ValueError, match="fewer than two summaries"):
        condense(layout(0, 0), fanout=1)

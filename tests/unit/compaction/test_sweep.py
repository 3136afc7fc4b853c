"""Sweep phases, the threshold, and the sweep drivers with an in-memory executor."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from lcm.compaction.planning import PassPlan
from lcm.compaction.sweep import (
    ChainPosition,
    continue_after_pass,
    next_pass,
    plan_after_pass,
    under_pressure,
)
from lcm.context import ContextEntry, context_tokens
from lcm.policy.threshold import evaluate_threshold
from tests.unit.compaction.builders import (
    Conversation,
    InMemoryCompactor,
    drive_chain,
    settings,
    summary_entry,
)


def summaries_then_tail(*depths: int, tokens: int = 100) -> list[ContextEntry]:
    conv = Conversation()
    conv.entries += [summary_entry(-100 + i, d, tokens=tokens) for i, d in enumerate(depths)]
    conv.user("latest", tokens=10)
    return conv.entries


BIG_BUDGET = 1_000_000


def routine(**kw: Any) -> dict[str, Any]:
    """Settings where the summarized prefix is over its target."""
    return {"summary_prefix_target_tokens": 150, "condensed_min_fanout": 4, **kw}


# --- threshold -----------------------------------------------------------------


def test_threshold_is_a_floor_of_the_budget_fraction() -> None:
    config = settings(context_threshold=0.75)
    assert evaluate_threshold(749, 1_000, config) == (750, False)
    assert evaluate_threshold(750, 1_000, config) == (750, True)
    assert evaluate_threshold(29, 100, settings(context_threshold=0.29)).threshold_tokens == 29
    with pytest.raises(ValueError, match="token_budget must be positive"):
        evaluate_threshold(1, 0, config)


def test_pressure_means_over_threshold_or_over_an_explicit_target() -> None:
    entries = summaries_then_tail(0, 0)  # 210 tokens
    config = settings(context_threshold=0.5)
    assert under_pressure(entries, config, 400)
    assert not under_pressure(entries, config, 1_000)
    assert under_pressure(entries, config, 1_000, target_tokens=200)
    assert not under_pressure(entries, config, 1_000, target_tokens=210)


# --- phases --------------------------------------------------------------------


def test_leaf_passes_come_before_any_condensation() -> None:
    conv = Conversation()
    conv.entries += [summary_entry(-10 + i) for i in range(6)]
    conv.exchanges(12)
    plan = next_pass(conv.entries, settings(fresh_tail_count=2, leaf_min_fanout=4, **routine()), 1)
    assert plan is not None
    assert plan.kind == "leaf"


def test_routine_condensation_only_when_the_prefix_exceeds_its_target() -> None:
    entries = summaries_then_tail(0, 0, 0, 0)
    plan = next_pass(entries, settings(**routine()), BIG_BUDGET)
    assert plan is not None
    assert (plan.phase, plan.depth) == ("routine", 1)
    relaxed = settings(**routine(summary_prefix_target_tokens=400))
    assert next_pass(entries, relaxed, BIG_BUDGET) is None


def test_prefix_target_defaults_to_the_design_formula() -> None:
    entries = summaries_then_tail(0, 0, 0, 0, tokens=600)  # 2 400 summary tokens
    config = settings(condensed_target_tokens=2_000, leaf_chunk_tokens=20_000)
    assert config.prefix_target_tokens(BIG_BUDGET) == 20_000
    assert next_pass(entries, config, BIG_BUDGET) is None
    # A budget of 10 000: max(2 000, min(20 000, 3 750)) = 3 750 > 2 400, nothing.
    assert next_pass(entries, config, 10_000) is None
    # At 5 000 the target falls to max(2 000, 1 875) = 2 000, under 2 400; and
    # 2 410 context tokens are below the 3 750 threshold: routine, not pressure.
    plan = next_pass(entries, config, 5_000)
    assert plan is not None
    assert plan.phase == "routine"


def test_sweep_max_depth_zero_is_leaf_only_outside_pressure() -> None:
    entries = summaries_then_tail(0, 0, 0, 0)
    assert next_pass(entries, settings(**routine(sweep_max_depth=0)), BIG_BUDGET) is None


def test_sweep_max_depth_one_creates_depth_one_only() -> None:
    entries = summaries_then_tail(1, 1, 1, 1)
    assert next_pass(entries, settings(**routine(sweep_max_depth=1)), BIG_BUDGET) is None
    plan = next_pass(entries, settings(**routine(sweep_max_depth=2)), BIG_BUDGET)
    assert plan is not None
    assert plan.depth == 2


def test_sweep_max_depth_minus_one_is_unlimited() -> None:
    entries = summaries_then_tail(5, 5, 5, 5)
    plan = next_pass(entries, settings(**routine(sweep_max_depth=-1)), BIG_BUDGET)
    assert plan is not None
    assert plan.depth == 6


def test_pressure_goes_deeper_with_the_hard_fanout() -> None:
    entries = summaries_then_tail(1, 1)  # two depth-1 summaries: below the normal fanout
    config = settings(**routine(sweep_max_depth=1, condensed_min_fanout_hard=2))
    assert next_pass(entries, config, BIG_BUDGET) is None
    plan = next_pass(entries, config, 250)  # 210 tokens >= 0.75 * 250
    assert plan is not None
    assert (plan.phase, plan.depth, len(plan.entries)) == ("pressure", 2, 2)
    plan = next_pass(entries, config, BIG_BUDGET, target_tokens=100)
    assert plan is not None
    assert plan.phase == "pressure"


def test_pressure_also_applies_when_sweep_max_depth_is_zero() -> None:
    entries = summaries_then_tail(0, 0)
    config = settings(sweep_max_depth=0, condensed_min_fanout_hard=2)
    plan = next_pass(entries, config, 250)
    assert plan is not None
    assert (plan.phase, plan.depth) == ("pressure", 1)


# --- drivers -------------------------------------------------------------------


def long_conversation(messages: int = 80, tokens: int = 200) -> Conversation:
    conv = Conversation()
    conv.exchanges(messages, tokens=tokens)
    return conv


SWEEP = {
    "fresh_tail_count": 8,
    "leaf_min_fanout": 4,
    "leaf_chunk_tokens": 1_000,
    "condensed_min_fanout": 4,
    "summary_prefix_target_tokens": 200,
}


@pytest.mark.parametrize("max_depth", [0, 1, 2, -1])
def test_a_sweep_runs_leaf_then_routine_passes_and_honours_max_depth(max_depth: int) -> None:
    conv = long_conversation(messages=400)
    config = settings(**SWEEP, sweep_max_depth=max_depth)
    compactor = InMemoryCompactor(conv, config)
    result = drive_chain(conv.entries, config, BIG_BUDGET, compactor)

    assert result.stop == "done"
    assert result.rounds == 1
    assert result.tokens_after < result.tokens_before
    phases = [p.phase for p in result.passes]
    assert phases == sorted(phases, key=["leaf", "routine", "pressure"].index)
    assert "pressure" not in phases
    depths = {e.summary.depth for e in result.entries if e.summary}
    limit = 10 if max_depth < 0 else max_depth
    assert max(depths) <= limit
    if max_depth == -1:
        assert max(depths) >= 2
    assert next_pass(result.entries, config, BIG_BUDGET) is None


def test_a_sweep_stops_when_a_pass_saves_nothing() -> None:
    conv = long_conversation(tokens=2)
    config = settings(**SWEEP)
    compactor = InMemoryCompactor(conv, config, summary_chars=800)
    result = drive_chain(conv.entries, config, BIG_BUDGET, compactor)
    assert result.stop == "no_savings"
    assert len(result.passes) == 1
    assert result.rounds == 1


def test_continue_after_pass() -> None:
    assert continue_after_pass(100, 90)
    assert not continue_after_pass(100, 100)
    assert not continue_after_pass(100, 90, target_tokens=95)
    assert continue_after_pass(100, 96, target_tokens=95)


def test_a_chain_with_a_target_stops_once_under_it() -> None:
    conv = long_conversation()
    config = settings(**SWEEP)
    compactor = InMemoryCompactor(conv, config)
    target = context_tokens(conv.entries) // 2
    result = drive_chain(conv.entries, config, BIG_BUDGET, compactor, target_tokens=target)
    assert result.tokens_after <= target
    assert result.rounds == 1
    # It stopped as soon as it could: one pass fewer would not have been enough.
    assert context_tokens(conv.entries) == result.tokens_after


def test_a_chain_with_a_target_already_met_runs_nothing() -> None:
    conv = long_conversation(messages=10)
    config = settings(**SWEEP)
    compactor = InMemoryCompactor(conv, config)
    result = drive_chain(conv.entries, config, BIG_BUDGET, compactor, target_tokens=10**9)
    assert result.passes == ()


class EverySecondPassSavesNothing:
    """Wraps the in-memory compactor; every second summary is as big as its input."""

    def __init__(self, inner: InMemoryCompactor) -> None:
        self.inner = inner
        self.calls = 0

    def __call__(self, plan: PassPlan) -> list[ContextEntry]:
        entries = self.inner(plan)
        self.calls += 1
        if self.calls % 2 == 0:
            entries = [
                replace(e, token_count=plan.source_tokens) if e.ordinal == plan.first_ordinal else e
                for e in entries
            ]
            self.inner.conversation.entries = entries
        return entries


def test_a_pass_that_saves_nothing_under_pressure_starts_a_new_round_up_to_max_rounds() -> None:
    conv = long_conversation(messages=200)
    config = settings(**SWEEP, max_rounds=3)
    runner = EverySecondPassSavesNothing(InMemoryCompactor(conv, config))
    result = drive_chain(conv.entries, config, BIG_BUDGET, runner, target_tokens=0)
    # Each round is two passes, the second saving nothing; three rounds, then stop.
    assert result.rounds == 3
    assert len(result.passes) == 6
    assert result.stop == "no_savings"
    assert result.tokens_after > 0


def test_without_pressure_a_pass_that_saves_nothing_ends_the_chain() -> None:
    conv = long_conversation(messages=200)
    config = settings(**SWEEP, max_rounds=3)
    runner = EverySecondPassSavesNothing(InMemoryCompactor(conv, config))
    result = drive_chain(conv.entries, config, BIG_BUDGET, runner)  # far under the threshold
    assert result.rounds == 1
    assert len(result.passes) == 2


def test_a_round_that_saved_nothing_at_all_ends_the_chain() -> None:
    conv = long_conversation(tokens=2)
    config = settings(**SWEEP)
    compactor = InMemoryCompactor(conv, config, summary_chars=800)
    result = drive_chain(conv.entries, config, BIG_BUDGET, compactor, target_tokens=0)
    assert result.rounds == 1
    assert len(result.passes) == 1


def test_plan_after_pass_counts_rounds() -> None:
    entries = summaries_then_tail(0, 0, 0, 0, 0, 0)
    config = settings(**SWEEP, max_rounds=2)
    tokens = context_tokens(entries)
    start = ChainPosition(1, tokens + 500)
    plan, position = plan_after_pass(tokens, entries, config, BIG_BUDGET, start, target_tokens=0)
    assert plan is not None
    assert position == ChainPosition(2, tokens)
    plan, position = plan_after_pass(tokens, entries, config, BIG_BUDGET, position, target_tokens=0)
    assert plan is None
    assert position.round == 2


def test_the_chain_stops_at_its_pass_and_time_bounds() -> None:
    entries = summaries_then_tail(0, 0, 0, 0, 0, 0)
    tokens = context_tokens(entries)
    bounded = settings(**SWEEP, sweep_max_passes=5, sweep_max_seconds=60)
    running = ChainPosition(1, tokens + 500, passes=4, started_at=1_000.0)
    # Within both bounds the pressure phase goes on...
    plan, _ = plan_after_pass(
        tokens + 50, entries, bounded, BIG_BUDGET, running, target_tokens=0, now=1_059.0
    )
    assert plan is not None
    # ...the fifth pass ends it, and so does the sixtieth second.
    for position, now in ((running.counted(), 1_001.0), (running, 1_060.0)):
        plan, _ = plan_after_pass(
            tokens + 50, entries, bounded, BIG_BUDGET, position, target_tokens=0, now=now
        )
        assert plan is None


def test_the_chain_position_travels_as_task_arguments() -> None:
    position = ChainPosition(2, 5_000, passes=7, started_at=1_700_000_000.5)
    assert ChainPosition.from_args(position.as_args()) == position
    assert ChainPosition.from_args([3, 900]) == ChainPosition(3, 900)  # an older sender's

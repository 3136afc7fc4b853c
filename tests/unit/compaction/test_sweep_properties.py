"""Random conversations, appended to and swept in random order: the LCM invariants.

After every step: every message is reachable exactly once and in order
(lossless); the fresh tail is the newest messages, untouched; the assembled
context is valid for the API and within budget unless the tail overflows.
Every sweep terminates and respects fanouts and ``sweep_max_depth``.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lcm.assembly import api_violations, assemble_context
from lcm.compaction.planning import PassPlan
from lcm.compaction.sweep import next_pass
from lcm.context import context_tokens
from lcm.policy.fresh_tail import split_fresh_tail
from lcm.settings import CompactionSettings
from tests.unit.compaction.builders import (
    Conversation,
    InMemoryCompactor,
    TurnSpec,
    add_turn,
    drive_chain,
    turns,
)

configs = st.builds(
    CompactionSettings,
    fresh_tail_count=st.integers(1, 10),
    fresh_tail_max_tokens=st.one_of(st.none(), st.integers(50, 3_000)),
    leaf_min_fanout=st.integers(2, 6),
    leaf_chunk_tokens=st.integers(256, 4_000),
    condensed_min_fanout=st.integers(2, 5),
    condensed_min_fanout_hard=st.just(2),
    condensed_target_tokens=st.integers(64, 600),
    summary_prefix_target_tokens=st.one_of(st.none(), st.integers(50, 800)),
    sweep_max_depth=st.integers(-1, 3),
    max_rounds=st.integers(1, 4),
)

steps = st.lists(
    st.one_of(
        st.lists(turns(), min_size=1, max_size=4),
        st.just("sweep"),
        st.integers(0, 5_000),  # a manual chain with this target
    ),
    min_size=1,
    max_size=12,
)


def check_pass(plan: PassPlan, config: CompactionSettings) -> None:
    if plan.kind == "leaf":
        assert len(plan.entries) >= config.leaf_min_fanout
        assert all(e.is_message for e in plan.entries)
        return
    depths = {e.summary_depth for e in plan.entries}
    assert len(depths) == 1
    depth = depths.pop()
    assert depth is not None
    assert plan.depth == depth + 1
    if plan.phase == "routine":
        assert len(plan.entries) >= config.condensed_min_fanout
        assert config.sweep_max_depth != 0
        assert config.sweep_max_depth < 0 or plan.depth <= config.sweep_max_depth
    else:
        assert plan.phase == "pressure"
        assert len(plan.entries) >= config.condensed_min_fanout_hard


def check_invariants(
    conv: Conversation, compactor: InMemoryCompactor, config: CompactionSettings, budget: int
) -> None:
    # Lossless: every message reachable exactly once, in order.
    assert compactor.reachable_message_ids(conv.entries) == [m.id for m in conv.messages]

    prefix, tail = split_fresh_tail(conv.entries, config)
    newest = conv.messages[len(conv.messages) - len(tail) :]
    assert [e.message for e in tail] == newest

    assembled = assemble_context(conv.entries, budget, config)
    assert api_violations(assembled.messages) == []
    assert assembled.fresh_tail_count == len(tail)
    if assembled.fresh_tail_overflow:
        assert assembled.summary_count == 0
        assert assembled.evicted_count == len(prefix)
    else:
        assert assembled.estimated_tokens <= budget


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(config=configs, budget=st.integers(300, 30_000), script=steps)
def test_appends_and_sweeps_keep_every_invariant(
    config: CompactionSettings, budget: int, script: list[Any]
) -> None:
    conv = Conversation()
    compactor = InMemoryCompactor(conv, config)
    for step in script:
        tail_before = split_fresh_tail(conv.entries, config).tail
        if isinstance(step, list):
            for spec in step:
                assert isinstance(spec, TurnSpec)
                add_turn(conv, spec)
        elif step == "sweep":
            entries_before = len(conv.entries)
            result = drive_chain(conv.entries, config, budget, compactor)
            # Each pass replaces at least two entries with one: bounded.
            assert len(result.passes) < max(entries_before, 1)
            assert result.rounds <= config.max_rounds
            for plan in result.passes:
                check_pass(plan, config)
            if result.stop == "done":
                assert next_pass(conv.entries, config, budget) is None
            assert all(any(e is t for e in conv.entries) for t in tail_before)
        else:
            targeted = drive_chain(conv.entries, config, budget, compactor, target_tokens=step)
            assert targeted.rounds <= config.max_rounds
            if targeted.stop == "done":  # nothing eligible is left, or it got under
                under = context_tokens(conv.entries) <= step
                assert under or next_pass(conv.entries, config, budget, target_tokens=step) is None
            for plan in targeted.passes:
                check_pass(plan, config)
            assert all(any(e is t for e in conv.entries) for t in tail_before)
        check_invariants(conv, compactor, config, budget)

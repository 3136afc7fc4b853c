"""Random conversations, summaries and budgets: assembly's promises hold."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lcm.assembly import api_violations, assemble_context
from lcm.context import ContextEntry
from lcm.policy.fresh_tail import split_fresh_tail
from lcm.settings import CompactionSettings
from tests.unit.compaction.builders import Conversation, TurnSpec, add_turn, summary_entry, turns

configs = st.builds(
    CompactionSettings,
    fresh_tail_count=st.integers(1, 12),
    fresh_tail_max_tokens=st.one_of(st.none(), st.integers(20, 3_000)),
)


def blocks_of(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [block for m in messages for block in m["content"]]


def build(
    specs: list[TurnSpec], summaries: list[int], cut: tuple[int, int], config: CompactionSettings
) -> list[ContextEntry]:
    conv = Conversation()
    conv.entries += [summary_entry(-100 + i, d) for i, d in enumerate(summaries)]
    for spec in specs:
        add_turn(conv, spec)
    # Summarize a random range of the prefix, as a leaf pass might have: it can
    # take a tool call and leave its result raw once the budget evicts around it.
    tail_start = len(split_fresh_tail(conv.entries, config).prefix)
    start, length = cut
    if start < tail_start:
        stop = min(tail_start, start + length)
        summary = summary_entry(conv.entries[start].ordinal, content="cut " * length)
        conv.entries[start:stop] = [summary]
    return conv.entries


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    config=configs,
    budget=st.one_of(st.integers(1, 3_000), st.integers(3_000, 300_000)),
    specs=st.lists(turns(), min_size=1, max_size=6),
    summaries=st.lists(st.integers(0, 3), max_size=5),
    cut=st.tuples(st.integers(0, 30), st.integers(1, 12)),
)
def test_assembled_context_is_valid_within_budget_and_keeps_the_tail(
    config: CompactionSettings,
    budget: int,
    specs: list[TurnSpec],
    summaries: list[int],
    cut: tuple[int, int],
) -> None:
    entries = build(specs, summaries, cut, config)
    prefix, tail = split_fresh_tail(entries, config)
    result = assemble_context(entries, budget, config)

    assert api_violations(result.messages) == []
    if result.messages:
        assert result.messages[0]["role"] == "user"
    if result.fresh_tail_overflow:
        assert result.summary_count == 0
        assert result.evicted_count == len(prefix)
    else:
        assert result.estimated_tokens <= budget
    assert result.estimated_tokens >= sum(e.token_count for e in tail)
    assert result.fresh_tail_count == len(tail)

    # The tail is there verbatim: its words, its calls, and results of its calls.
    out = blocks_of(result.messages)
    out_texts = {b.get("text") for b in out if b["type"] == "text"}
    tail_calls: set[str] = set()
    for entry in tail:
        message = entry.message
        assert message is not None
        if message.role in ("user", "assistant") and message.content_shape == "text":
            assert not message.content.strip() or message.content in out_texts
        for part in message.parts:
            if part.part_type == "tool_use":
                tail_calls.add(part.payload["id"])
                assert dict(part.payload) in out
            elif part.part_type == "tool_result" and part.tool_call_id in tail_calls:
                assert dict(part.payload) in out


def without_memo(entries: list[ContextEntry]) -> list[ContextEntry]:
    """The same entries with message views built anew: nothing rendered yet."""
    return [replace(e, message=replace(e.message)) if e.message is not None else e for e in entries]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    config=configs,
    budget=st.one_of(st.integers(1, 3_000), st.integers(3_000, 300_000)),
    specs=st.lists(turns(), min_size=1, max_size=6),
    summaries=st.lists(st.integers(0, 3), max_size=5),
    cut=st.tuples(st.integers(0, 30), st.integers(1, 12)),
    second_budget=st.integers(1, 300_000),
)
def test_rendered_turns_kept_on_the_views_do_not_change_later_assemblies(
    config: CompactionSettings,
    budget: int,
    specs: list[TurnSpec],
    summaries: list[int],
    cut: tuple[int, int],
    second_budget: int,
) -> None:
    """Views keep their rendered turn between turns; no repair may change it in place."""
    entries = build(specs, summaries, cut, config)
    assemble_context(entries, budget, config)  # renders, repairs, and keeps the turns
    for b in (budget, second_budget):
        assert assemble_context(entries, b, config) == assemble_context(
            without_memo(entries), b, config
        )

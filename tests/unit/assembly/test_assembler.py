"""Filling the budget: fresh tail always, prefix newest-first, overflow reported."""

from __future__ import annotations

from typing import Any

import pytest

from lcm.assembly import api_violations, assemble_context, summary_context_tokens
from tests.unit.compaction.builders import Conversation, settings, summary_entry

TAIL_1 = settings(fresh_tail_count=1)


def texts_of(messages: list[dict[str, Any]]) -> list[str]:
    return [block["text"] for m in messages for block in m["content"] if block["type"] == "text"]


def test_everything_fits_in_a_large_budget() -> None:
    conv = Conversation()
    conv.entries.append(summary_entry(0, content="earlier work"))
    conv.exchanges(6, tokens=10)
    result = assemble_context(conv.entries, 100_000, settings(fresh_tail_count=2))
    assert (result.summary_count, result.fresh_tail_count, result.evicted_count) == (1, 2, 0)
    assert result.fresh_tail_overflow is False
    summary = conv.entries[0].summary
    assert summary is not None
    assert result.estimated_tokens == summary_context_tokens(summary) + 60
    assert result.messages[0]["role"] == "user"
    assert texts_of(result.messages)[0].startswith("<summary id=")
    assert api_violations(result.messages) == []


def test_prefix_is_filled_newest_first_and_stops_at_the_first_misfit() -> None:
    conv = Conversation()
    conv.user("old small", tokens=5)
    conv.assistant("big", tokens=500)
    conv.user("recent", tokens=20)
    conv.assistant("recent answer", tokens=20)
    conv.user("now", tokens=10)
    result = assemble_context(conv.entries, 100, TAIL_1)
    # "old small" would fit the room left, but the big message before it in
    # time ends the recent stretch: no gaps in the history the model sees.
    assert texts_of(result.messages) == ["recent", "recent answer", "now"]
    assert (result.estimated_tokens, result.evicted_count) == (50, 2)


def test_fresh_tail_is_always_included_and_overflow_is_flagged() -> None:
    conv = Conversation()
    conv.entries.append(summary_entry(0))
    conv.exchanges(4, tokens=10)
    conv.user("huge", tokens=5_000)
    result = assemble_context(conv.entries, 1_000, TAIL_1)
    assert result.fresh_tail_overflow is True
    assert texts_of(result.messages) == ["huge"]
    assert result.summary_count == 0
    assert result.evicted_count == 5
    assert result.estimated_tokens == 5_000


def test_repairs_that_overrun_the_budget_evict_more_of_the_prefix() -> None:
    conv = Conversation()
    conv.assistant("opening", tokens=10)  # would need a placeholder user message
    conv.user("u", tokens=10)
    conv.assistant("a", tokens=10)
    conv.user("now", tokens=10)
    result = assemble_context(conv.entries, 40, TAIL_1)
    assert texts_of(result.messages) == ["u", "a", "now"]
    assert (result.estimated_tokens, result.evicted_count) == (30, 1)


def test_repairs_of_the_tail_itself_can_overflow() -> None:
    conv = Conversation()
    conv.user("go", tokens=10)
    conv.tool_call("a", tokens=10)
    conv.tool_result("a", tokens=10)
    conv.assistant("done", tokens=10)
    tail_only = settings(fresh_tail_count=2)
    result = assemble_context(conv.entries[2:], 20, tail_only)  # opens with a tool result
    assert result.estimated_tokens > 20
    assert result.fresh_tail_overflow
    assert api_violations(result.messages) == []


def test_empty_context_assembles_to_nothing() -> None:
    result = assemble_context([], 1_000, settings())
    assert result.messages == []
    assert result.estimated_tokens == 0
    assert not result.fresh_tail_overflow


def test_budget_must_be_positive() -> None:
    with pytest.raises(ValueError, match="token_budget must be positive"):
        assemble_context([], 0, settings())

"""Prompt-aware eviction and recalled snippets in the pure assembler (no database)."""

from __future__ import annotations

from typing import Any

from lcm.assembly import RecalledSnippet, api_violations, assemble_context
from lcm.assembly.selection import tool_safe_units
from tests.unit.compaction.builders import Conversation, settings, summary_entry

TAIL_2 = settings(fresh_tail_count=2)


def texts_of(messages: list[dict[str, Any]]) -> list[str]:
    return [b.get("text", "") for m in messages for b in m["content"] if b["type"] == "text"]


def test_relevant_old_entries_win_over_recent_ones_in_time_order() -> None:
    conv = Conversation()
    old = conv.user("the relay port is 7443", tokens=20)
    conv.assistant("noted", tokens=20)
    for i in range(6):
        (conv.user if i % 2 == 0 else conv.assistant)(f"filler {i}", tokens=20)
    conv.user("now", tokens=10)
    conv.assistant("ok", tokens=10)
    plain = assemble_context(conv.entries, 80, TAIL_2)
    assert "the relay port is 7443" not in texts_of(plain.messages)
    ranked = assemble_context(conv.entries, 80, TAIL_2, relevance={old.ordinal: 0.4})
    texts = texts_of(ranked.messages)
    # The match first, then the newest that fit; in time order; the tail last.
    assert texts[0] == "the relay port is 7443"
    assert texts[-2:] == ["now", "ok"]
    assert "filler 5" in texts
    assert ranked.estimated_tokens <= 80
    # No relevance: today's newest-first window.
    assert assemble_context(conv.entries, 80, TAIL_2, relevance={}) == plain


def test_a_tool_call_and_its_result_are_one_unit() -> None:
    conv = Conversation()
    conv.entries.append(summary_entry(0))
    conv.user("go", tokens=5)
    conv.tool_call("t1", tokens=10)
    result = conv.tool_result("t1", output="port 7443", tokens=10)
    conv.assistant("done", tokens=5)
    units = tool_safe_units(conv.entries)
    assert units == [[0], [1], [2, 3], [4]]
    conv.exchanges(8, tokens=15)
    out = assemble_context(conv.entries, 80, TAIL_2, relevance={result.ordinal: 0.9})
    assert api_violations(out.messages) == []
    assert "[No result was recorded" not in str(out.messages)
    shown = str(out.messages)
    assert "'tool_use_id': 't1'" in shown
    assert "'id': 't1'" in shown


def test_recalled_snippets_take_room_from_the_prefix_never_the_tail() -> None:
    conv = Conversation()
    conv.exchanges(10, tokens=15)
    snippet = RecalledSnippet(7, 3, "assistant", "ORBIT_PORT", "We set ORBIT_PORT to 7443.")
    out = assemble_context(conv.entries, 120, TAIL_2, recalled=[snippet])
    assert out.recalled == (snippet,)
    assert out.estimated_tokens <= 120
    block = out.messages[out.recalled_index or 0]["content"][0]["text"]
    assert block.startswith("<recalled_history>")
    assert 'id="msg_7"' in block
    assert texts_of(out.messages)[-2:] == ["m8", "m9"]
    plain = assemble_context(conv.entries, 120, TAIL_2)
    assert out.evicted_count > plain.evicted_count
    # Beside a tail that fills the budget: not shown.
    tight = assemble_context(conv.entries, 31, TAIL_2, recalled=[snippet])
    assert tight.recalled == ()
    assert tight.estimated_tokens <= 31


def test_a_relevant_summary_is_kept_like_a_message() -> None:
    conv = Conversation()
    old = summary_entry(0, content="the kestrel relay moved to port 7443")
    conv.entries.append(old)
    conv.exchanges(12, tokens=20)
    rendered = assemble_context(conv.entries, 100_000, TAIL_2).estimated_tokens
    plain = assemble_context(conv.entries, 140, TAIL_2)
    assert plain.summary_count == 0
    ranked = assemble_context(conv.entries, 140, TAIL_2, relevance={old.ordinal: 0.2})
    assert ranked.summary_count == 1
    assert "port 7443" in texts_of(ranked.messages)[0]
    assert ranked.estimated_tokens <= 140 < rendered

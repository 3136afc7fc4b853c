"""The fresh tail: count, token cap, the latest user turn and tool pairs."""

from __future__ import annotations

from lcm.policy.fresh_tail import fresh_tail_start, split_fresh_tail
from tests.unit.compaction.builders import Conversation, settings, summary_entry


def test_tail_is_the_newest_fresh_tail_count_messages() -> None:
    conv = Conversation()
    conv.exchanges(10)
    assert fresh_tail_start(conv.entries, settings(fresh_tail_count=4)) == 6


def test_tail_is_everything_when_the_conversation_is_short() -> None:
    conv = Conversation()
    conv.exchanges(3)
    prefix, tail = split_fresh_tail(conv.entries, settings(fresh_tail_count=64))
    assert prefix == ()
    assert len(tail) == 3


def test_token_cap_limits_the_tail() -> None:
    conv = Conversation()
    conv.exchanges(9, tokens=10)  # ends with a user message: no turn extension needed
    config = settings(fresh_tail_count=8, fresh_tail_max_tokens=35)
    assert len(split_fresh_tail(conv.entries, config).tail) == 3


def test_token_cap_always_keeps_the_newest_message() -> None:
    conv = Conversation()
    conv.exchanges(4, tokens=10)
    conv.user("a very long prompt", tokens=5_000)
    config = settings(fresh_tail_count=8, fresh_tail_max_tokens=100)
    tail = split_fresh_tail(conv.entries, config).tail
    assert [e.message.seq for e in tail if e.message] == [5]


def test_latest_user_turn_is_never_split_by_the_count() -> None:
    conv = Conversation()
    conv.exchanges(6)
    prompt = conv.user("fix the build")
    for i in range(5):
        conv.tool_call(f"c{i}")
        conv.tool_result(f"c{i}")
    conv.assistant("fixed")
    tail = split_fresh_tail(conv.entries, settings(fresh_tail_count=4)).tail
    assert tail[0] is prompt
    assert len(tail) == 12


def test_latest_user_turn_overrides_the_token_cap() -> None:
    conv = Conversation()
    conv.exchanges(4, tokens=10)
    prompt = conv.user("do it", tokens=10)
    conv.assistant("working", tokens=500)
    config = settings(fresh_tail_count=8, fresh_tail_max_tokens=100)
    assert split_fresh_tail(conv.entries, config).tail[0] is prompt


def test_tool_results_in_user_messages_do_not_start_a_turn() -> None:
    conv = Conversation()
    conv.exchanges(4)
    prompt = conv.user("go")
    conv.tool_call("a")
    conv.tool_result("a")  # a user message, but tool output
    conv.assistant("done")
    assert split_fresh_tail(conv.entries, settings(fresh_tail_count=2)).tail[0] is prompt


def test_tail_start_never_separates_a_tool_use_from_its_result() -> None:
    conv = Conversation()
    conv.entries.append(summary_entry(0))  # the latest prompt is already summarized
    conv.tool_call("a")
    call_b = conv.tool_call("b")
    conv.tool_result("b")
    conv.assistant("done")
    # A count of 2 would start the tail at the result of "b": extend to its call.
    assert split_fresh_tail(conv.entries, settings(fresh_tail_count=2)).tail[0] is call_b


def test_results_spread_over_tool_messages_stay_with_their_call() -> None:
    conv = Conversation()
    conv.entries.append(summary_entry(0))
    call = conv.tool_call("x", "y")
    conv.add("tool", [{"type": "tool_result", "tool_use_id": "x", "content": "1"}])
    conv.add("tool", [{"type": "tool_result", "tool_use_id": "y", "content": "2"}])
    assert split_fresh_tail(conv.entries, settings(fresh_tail_count=1)).tail[0] is call


def test_tail_is_counted_over_the_trailing_run_of_raw_messages() -> None:
    conv = Conversation()
    conv.exchanges(4)
    conv.entries.append(summary_entry(conv.next_ordinal))
    conv.next_ordinal += 1
    conv.exchanges(2)
    prefix, tail = split_fresh_tail(conv.entries, settings(fresh_tail_count=64))
    assert len(tail) == 2
    assert len(prefix) == 5


def test_tail_is_empty_when_the_context_ends_with_a_summary() -> None:
    conv = Conversation()
    conv.exchanges(4)
    conv.entries.append(summary_entry(conv.next_ordinal))
    assert split_fresh_tail(conv.entries, settings()).tail == ()
    assert split_fresh_tail([], settings()) == ((), ())

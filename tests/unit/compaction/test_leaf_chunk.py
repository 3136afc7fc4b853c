"""The oldest leaf chunk: fanout, token cap, tool pairs, the fresh tail."""

from __future__ import annotations

from lcm.compaction.planning import fresh_tail_start, oldest_leaf_chunk
from tests.unit.compaction.builders import Conversation, settings, summary_entry


def seqs(plan: object) -> list[int]:
    return [e.message.seq for e in plan.entries if e.message]  # type: ignore[attr-defined]


def test_no_chunk_below_the_minimum_fanout() -> None:
    conv = Conversation()
    conv.exchanges(7 + 4)
    config = settings(fresh_tail_count=4, leaf_min_fanout=8)
    assert oldest_leaf_chunk(conv.entries, config) is None
    conv.exchanges(2)  # the tail moves on: nine messages are now outside it
    plan = oldest_leaf_chunk(conv.entries, config)
    assert plan is not None
    assert seqs(plan) == list(range(1, 10))


def test_chunk_takes_the_oldest_messages_up_to_the_token_cap() -> None:
    conv = Conversation()
    conv.exchanges(30, tokens=100)
    config = settings(fresh_tail_count=4, leaf_min_fanout=4, leaf_chunk_tokens=650)
    plan = oldest_leaf_chunk(conv.entries, config)
    assert plan is not None
    assert seqs(plan) == [1, 2, 3, 4, 5, 6]
    assert (plan.kind, plan.depth, plan.phase, plan.source_tokens) == ("leaf", 0, "leaf", 600)
    assert plan.first_ordinal == conv.entries[0].ordinal
    assert plan.last_ordinal == conv.entries[5].ordinal


def test_minimum_fanout_wins_over_the_cap_so_a_pass_always_progresses() -> None:
    conv = Conversation()
    conv.exchanges(12, tokens=5_000)
    config = settings(fresh_tail_count=2, leaf_min_fanout=3, leaf_chunk_tokens=1_000)
    plan = oldest_leaf_chunk(conv.entries, config)
    assert plan is not None
    assert seqs(plan) == [1, 2, 3]


def test_chunk_end_moves_back_rather_than_split_a_tool_pair() -> None:
    conv = Conversation()
    conv.exchanges(4, tokens=100)
    conv.tool_call("a", tokens=100)  # seq 5: the cap would end the chunk here
    conv.tool_result("a", tokens=100)
    conv.exchanges(10, tokens=100)
    config = settings(fresh_tail_count=2, leaf_min_fanout=3, leaf_chunk_tokens=500)
    plan = oldest_leaf_chunk(conv.entries, config)
    assert plan is not None
    assert seqs(plan) == [1, 2, 3, 4]


def test_chunk_end_moves_forward_when_moving_back_breaks_the_fanout() -> None:
    conv = Conversation()
    conv.user("go", tokens=100)
    conv.tool_call("a", tokens=100)
    conv.tool_result("a", tokens=100)
    conv.tool_call("b", tokens=100)  # seq 4: fanout 4 ends here
    conv.tool_result("b", tokens=100)
    conv.exchanges(10, tokens=100)
    config = settings(fresh_tail_count=2, leaf_min_fanout=4, leaf_chunk_tokens=256)
    plan = oldest_leaf_chunk(conv.entries, config)
    assert plan is not None
    assert seqs(plan) == [1, 2, 3, 4, 5]


def test_chunk_keeps_interleaved_calls_with_their_results() -> None:
    conv = Conversation()
    conv.tool_call("a", tokens=100)
    conv.tool_call("b", tokens=100)
    conv.tool_result("a", "b", tokens=100)  # cuts after seq 1 and seq 2 split a pair
    conv.user("next", tokens=100)
    config = settings(fresh_tail_count=1, leaf_min_fanout=2, leaf_chunk_tokens=256)
    plan = oldest_leaf_chunk(conv.entries, config)
    assert plan is not None
    assert seqs(plan) == [1, 2, 3]


def test_chunk_never_reaches_into_the_fresh_tail() -> None:
    conv = Conversation()
    conv.exchanges(20, tokens=10)
    config = settings(fresh_tail_count=6, leaf_min_fanout=4, leaf_chunk_tokens=100_000)
    plan = oldest_leaf_chunk(conv.entries, config)
    assert plan is not None
    assert seqs(plan) == list(range(1, 15))
    assert plan.entries[-1] is conv.entries[fresh_tail_start(conv.entries, config) - 1]


def test_chunk_starts_after_summaries_and_names_the_previous_summary() -> None:
    conv = Conversation()
    conv.entries += [summary_entry(-3, sid="sum_aaaaaaaaaaaaaaaa"), summary_entry(-2)]
    conv.exchanges(12)
    config = settings(fresh_tail_count=2, leaf_min_fanout=4)
    plan = oldest_leaf_chunk(conv.entries, config)
    assert plan is not None
    assert seqs(plan)[0] == 1
    assert plan.previous_summary is conv.entries[1].summary
    assert plan.message_ids == tuple(e.message.id for e in plan.entries if e.message)


def test_a_short_run_stranded_between_summaries_is_skipped() -> None:
    conv = Conversation()
    conv.exchanges(2)
    conv.entries.append(summary_entry(50))
    conv.next_ordinal = 60
    conv.exchanges(12)
    config = settings(fresh_tail_count=2, leaf_min_fanout=4)
    plan = oldest_leaf_chunk(conv.entries, config)
    assert plan is not None
    assert seqs(plan)[0] == 3
    assert plan.previous_summary is conv.entries[2].summary

"""The oldest leaf chunk: fanout, token cap, tool pairs, the fresh tail."""

from __future__ import annotations

from datetime import UTC, datetime

from lcm.assembly.render import summary_context_tokens
from lcm.compaction.planning import LEAF_MIN_SOURCE_TOKENS, oldest_leaf_chunk
from lcm.compaction.source import wrapper_tokens
from lcm.context import SummaryView
from lcm.policy.fresh_tail import fresh_tail_start
from lcm.summarize.truncation import truncate_source
from lcm.tokens import estimate_tokens
from tests.unit.compaction.builders import Conversation, settings, summary_entry


def seqs(plan: object) -> list[int]:
    return [e.message.seq for e in plan.entries if e.message]  # type: ignore[attr-defined]


def test_no_chunk_below_the_minimum_fanout() -> None:
    conv = Conversation()
    conv.exchanges(7 + 4, tokens=20)
    config = settings(fresh_tail_count=4, leaf_min_fanout=8)
    assert oldest_leaf_chunk(conv.entries, config) is None
    conv.exchanges(2, tokens=20)  # the tail moves on: nine messages are now outside it
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


def test_a_chunk_no_summary_could_shrink_waits_until_it_can() -> None:
    # Eight messages of 10 tokens: any summary item (wrapper, marker and
    # footer) costs more than the 80 tokens it would replace.
    conv = Conversation()
    conv.exchanges(8 + 4, tokens=10)
    config = settings(fresh_tail_count=4, leaf_min_fanout=4)
    assert oldest_leaf_chunk(conv.entries, config) is None
    conv.exchanges(4, tokens=10)  # four more leave the tail: 120 tokens outside it
    plan = oldest_leaf_chunk(conv.entries, config)
    assert plan is not None
    assert plan.source_tokens == 120 > LEAF_MIN_SOURCE_TOKENS


def test_a_small_stranded_run_is_passed_over_for_a_later_one() -> None:
    conv = Conversation()
    conv.exchanges(4, tokens=10)  # 40 tokens: nothing could replace them for less
    conv.entries.append(summary_entry(conv.next_ordinal, tokens=50))
    conv.next_ordinal += 1
    conv.exchanges(12, tokens=50)
    plan = oldest_leaf_chunk(conv.entries, settings(fresh_tail_count=4, leaf_min_fanout=4))
    assert plan is not None
    assert seqs(plan)[0] == 5


def test_the_floor_leaves_room_for_the_smallest_summary() -> None:
    # The largest wrapper a leaf gets (a long count, times with microseconds)
    # plus the smallest text a pass writes (marker and footer) fit under the
    # floor, with room left for a few words.
    stamp = datetime(2026, 11, 26, 13, 43, 11, 389_801, tzinfo=UTC)
    widest = SummaryView(
        id="sum_0123456789abcdef",
        kind="leaf",
        depth=0,
        content="",
        token_count=0,
        earliest_at=stamp,
        latest_at=stamp,
        descendant_count=999_999,
    )
    smallest_text = estimate_tokens(truncate_source("ok", 1))
    assert summary_context_tokens(widest) + smallest_text + 16 <= LEAF_MIN_SOURCE_TOKENS
    # The engine's bound uses the same wrapper, for the plan at hand.
    conv = Conversation()
    conv.exchanges(12, tokens=100)
    plan = oldest_leaf_chunk(conv.entries, settings(fresh_tail_count=2, leaf_min_fanout=4))
    assert plan is not None
    assert 0 < wrapper_tokens(plan) <= summary_context_tokens(widest)

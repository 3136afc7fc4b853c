"""The times each assembled message covers: messages, summaries, merged turns, the placeholder."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from lcm.assembly import TimeSpan, assemble_context
from lcm.assembly.normalize import PLACEHOLDER_TEXT, normalized_turns
from lcm.assembly.render import Turn, render_entry, text_block
from lcm.context import ContextEntry
from tests.unit.compaction.builders import T0, Conversation, settings, summary_entry

TAIL_2 = settings(fresh_tail_count=2)


def at(minutes: int) -> TimeSpan:
    return (T0 + timedelta(minutes=minutes), T0 + timedelta(minutes=minutes))


def between(first: TimeSpan, last: TimeSpan) -> TimeSpan:
    return (first[0], last[1])


def timed(entry: ContextEntry, minutes: int) -> ContextEntry:
    """``entry`` with its message created ``minutes`` after T0."""
    assert entry.message is not None
    message = replace(entry.message, created_at=T0 + timedelta(minutes=minutes))
    return replace(entry, message=message)


def times_of(turns: list[Turn]) -> tuple[list[Turn], int]:
    return normalized_turns(turns, times=True)


def test_a_message_covers_its_own_time_and_a_summary_its_range() -> None:
    conv = Conversation()
    message = timed(conv.user("hello"), 5)
    rendered = render_entry(message)
    assert rendered.turn is not None
    assert rendered.turn.span == at(5)
    assert render_entry(message).turn is rendered.turn  # the memo keeps it
    summary = render_entry(summary_entry(1)).turn
    assert summary is not None
    assert summary.span == (T0, T0 + timedelta(hours=1))


def test_merged_turns_cover_the_earliest_and_latest_of_theirs() -> None:
    first = Turn("user", [text_block("a")], at(30))
    second = Turn("user", [text_block("b")], at(10))
    third = Turn("user", [text_block("c")], at(20))
    answer = Turn("assistant", [text_block("d")], at(40))
    turns, _ = normalized_turns([first, second, third, answer], times=True)
    assert [t.span for t in turns] == [between(at(10), at(30)), at(40)]
    # The inputs are shared (memoized on their views): none was changed.
    assert (first.span, second.span, third.span) == (at(30), at(10), at(20))
    assert first.blocks == [text_block("a")]


def test_neighbours_merged_around_a_dropped_message_cover_both() -> None:
    thinking = {"type": "thinking", "thinking": "hmm", "signature": "sig"}
    turns, _ = times_of(
        [
            Turn("user", [text_block("q1")], at(1)),
            Turn("assistant", [thinking], at(2)),  # older thinking only: dropped
            Turn("user", [text_block("q2")], at(3)),
            Turn("assistant", [text_block("a2")], at(4)),
        ]
    )
    assert [t.span for t in turns] == [between(at(1), at(3)), at(4)]


def test_a_turn_without_times_takes_its_neighbours_when_merged() -> None:
    turns, _ = times_of([Turn("user", [text_block("a")]), Turn("user", [text_block("b")], at(3))])
    assert [t.span for t in turns] == [at(3)]


def test_the_placeholder_has_the_times_of_the_message_it_opens() -> None:
    turns, _ = times_of(
        [Turn("assistant", [text_block("hi")], at(7)), Turn("user", [text_block("q")], at(8))]
    )
    assert turns[0].blocks == [text_block(PLACEHOLDER_TEXT)]
    assert [t.span for t in turns] == [at(7), at(7), at(8)]


def test_assembled_spans_align_with_the_messages() -> None:
    conv = Conversation()
    summary = summary_entry(0)  # T0 to T0 + 1h
    entries = [
        summary,
        timed(conv.user("after the summary"), 70),
        timed(conv.assistant("reply"), 71),
        timed(conv.user("next"), 72),
        timed(conv.user("and more"), 73),
    ]
    result = assemble_context(entries, 100_000, TAIL_2, times=True)
    # The summary and the user message after it merge (roles alternate), as
    # do the last two user messages.
    assert [m["role"] for m in result.messages] == ["user", "assistant", "user"]
    assert result.message_spans() == [
        (T0, at(70)[1]),
        at(71),
        between(at(72), at(73)),
    ]


def test_an_assembly_opening_with_an_assistant_message_spans_its_placeholder() -> None:
    conv = Conversation()
    entries = [timed(conv.assistant("left over"), 1), timed(conv.user("question"), 2)]
    result = assemble_context(entries, 100_000, TAIL_2, times=True)
    assert len(result.messages) == 3
    assert result.message_spans() == [at(1), at(1), at(2)]


def test_no_messages_no_spans() -> None:
    assert assemble_context([], 1_000, TAIL_2, times=True).message_spans() == []


def test_without_times_merges_leave_no_span_and_the_result_none() -> None:
    turns, _ = normalized_turns(
        [Turn("user", [text_block("a")], at(1)), Turn("user", [text_block("b")], at(2))]
    )
    assert turns[0].span is None  # not worked out: nobody asked
    conv = Conversation()
    result = assemble_context([timed(conv.user("q"), 1)], 1_000, TAIL_2)
    with pytest.raises(ValueError, match="without times"):
        result.message_spans()

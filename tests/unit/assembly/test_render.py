"""Summary XML, rebuilding stored messages, and turning entries into API turns."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

from lcm.assembly import message_to_provider, render_summary, summary_context_tokens
from lcm.assembly.render import render_entry
from lcm.context import PartView
from lcm.tokens import estimate_tokens
from tests.unit.compaction.builders import Conversation, summary_entry


def test_leaf_summary_is_wrapped_with_its_attributes() -> None:
    summary = summary_entry(1, 0, sid="sum_0123456789abcdef", content="Fixed the build.").summary
    assert summary is not None
    assert render_summary(summary) == (
        '<summary id="sum_0123456789abcdef" kind="leaf" depth="0" descendant_count="4"'
        ' earliest_at="2025-03-01T12:00:00Z" latest_at="2025-03-01T13:00:00Z">\n'
        "Fixed the build.\n"
        "</summary>"
    )


def test_condensed_summary_lists_its_parents() -> None:
    parents = ("sum_aaaaaaaaaaaaaaaa", "sum_bbbbbbbbbbbbbbbb")
    summary = summary_entry(1, 2, parents=parents, content="Arc.").summary
    assert summary is not None
    text = render_summary(summary)
    assert 'kind="condensed" depth="2"' in text
    assert (
        '<parents><summary_ref id="sum_aaaaaaaaaaaaaaaa"/>'
        '<summary_ref id="sum_bbbbbbbbbbbbbbbb"/></parents>\nArc.\n</summary>'
    ) in text


def test_attributes_are_xml_escaped_and_content_is_not() -> None:
    summary = summary_entry(1, 1, sid="sum_\"<&>'", parents=('p"&',), content="a < b && c").summary
    assert summary is not None
    text = render_summary(summary)
    assert 'id="sum_&quot;&lt;&amp;&gt;\'"' in text
    assert '<summary_ref id="p&quot;&amp;"/>' in text
    assert "\na < b && c\n" in text


def test_times_are_iso_utc_even_from_other_zones_or_naive_values() -> None:
    summary = summary_entry(1).summary
    assert summary is not None
    east = timezone(timedelta(hours=9))
    shifted = replace(
        summary,
        earliest_at=datetime(2025, 3, 1, 21, 0, tzinfo=east),
        latest_at=datetime(2025, 3, 1, 13, 30, 5),
    )
    text = render_summary(shifted)
    assert 'earliest_at="2025-03-01T12:00:00Z"' in text
    assert 'latest_at="2025-03-01T13:30:05Z"' in text


def test_summary_cost_is_its_rendered_size() -> None:
    entry = summary_entry(1, content="数据 " * 50)
    assert entry.summary is not None
    cost = summary_context_tokens(entry.summary)
    assert cost == estimate_tokens(render_summary(entry.summary))
    assert render_entry(entry).tokens == cost


def test_message_rebuilds_as_sent() -> None:
    conv = Conversation()
    plain = conv.user("hello")
    blocks: list[dict[str, Any]] = [
        {"type": "thinking", "thinking": "hmm", "signature": "s"},
        {"type": "text", "text": "Reading."},
        {"type": "tool_use", "id": "t1", "name": "read", "input": {"p": 1}},
    ]
    structured = conv.add("assistant", blocks)
    assert plain.message
    assert structured.message
    assert message_to_provider(plain.message) == {"role": "user", "content": "hello"}
    rebuilt = message_to_provider(structured.message)
    assert rebuilt == {"role": "assistant", "content": blocks}
    rebuilt["content"][0]["thinking"] = "changed"
    assert structured.message.parts[0].payload["thinking"] == "hmm"


def test_system_message_becomes_tagged_user_text_in_place() -> None:
    conv = Conversation()
    entry = conv.add("system", "Be brief.", tokens=3)
    rendered = render_entry(entry)
    assert rendered.turn is not None
    assert rendered.turn.role == "user"
    assert rendered.turn.blocks == [
        {"type": "text", "text": "<system_message>\nBe brief.\n</system_message>"}
    ]
    assert rendered.tokens > 3


def test_tool_message_with_call_id_becomes_a_tool_result() -> None:
    conv = Conversation()
    part = PartView("text", {"type": "text", "text": "42"}, "call_1", "42")
    rendered = render_entry(conv.add("tool", "42", parts=(part,)))
    assert rendered.turn is not None
    assert rendered.turn.role == "user"
    assert rendered.turn.blocks == [
        {"type": "tool_result", "tool_use_id": "call_1", "content": "42"}
    ]


def test_tool_message_without_call_id_becomes_tagged_text() -> None:
    rendered = render_entry(Conversation().add("tool", "exit 0"))
    assert rendered.turn is not None
    assert rendered.turn.blocks == [
        {"type": "text", "text": "<tool_output>\nexit 0\n</tool_output>"}
    ]


def test_blocks_a_role_may_not_carry_fall_back_to_their_text() -> None:
    image = {"type": "image", "source": {"type": "base64", "data": "AAA"}}
    rendered = render_entry(Conversation().add("assistant", [image, {"type": "text", "text": " "}]))
    assert rendered.turn is not None
    assert rendered.turn.blocks == [{"type": "text", "text": "[image]"}]


def test_blank_messages_render_to_nothing() -> None:
    conv = Conversation()
    assert render_entry(conv.assistant("  \n")).turn is None
    assert render_entry(conv.add("system", "")).turn is None

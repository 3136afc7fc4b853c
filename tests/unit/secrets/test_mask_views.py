"""Masking what leaves: match ranges moved onto masked text, stored messages masked by value."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from lcm.context import MessageView, PartView
from lcm.retrieval.snippets import build_snippet
from lcm.secrets.masking import SecretSpan, mask_ranges
from lcm.secrets.views import mask_view, secret_values

KEY = "AKIA" + "Q7RX" * 4
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----"


def test_ranges_follow_the_masked_text_and_widen_over_a_secret() -> None:
    text = f"key={KEY} and more words"
    spans = [SecretSpan(None, 4, len(KEY), "aws_key", 1)]
    masked, ranges = mask_ranges(text, spans, [(0, 3), (6, 10), (len(text) - 5, len(text))])
    assert masked == "key=[secret:aws_key#1] and more words"
    assert [masked[s:e] for s, e in ranges] == ["key", "[secret:aws_key#1]", "words"]


def test_a_snippet_cut_through_a_secret_never_shows_half_of_it() -> None:
    text = "x" * 300 + KEY + "y" * 300
    spans = [SecretSpan(None, 300, len(KEY), "aws_key", 2)]
    match = (310, 315)  # inside the key: the window starts in it
    masked, ranges = mask_ranges(text, spans, [match])
    snippet = build_snippet(masked, ranges)
    assert "Q7RX" not in snippet
    assert "«[secret:aws_key#2]»" in snippet


def test_overlapping_spans_move_ranges_past_their_union() -> None:
    text = "0123456789abcdef"
    spans = [SecretSpan(None, 2, 6, "jwt", 1), SecretSpan(None, 5, 6, "bearer_token", 2)]
    masked, ranges = mask_ranges(text, spans, [(12, 14)])
    assert masked == "01[secret:jwt#1]bcdef"
    assert [masked[s:e] for s, e in ranges] == ["cd"]


def test_a_tool_use_input_is_masked_by_value_even_when_json_escaped() -> None:
    call = {"type": "tool_use", "id": "t1", "name": "write", "input": {"key": PEM, "n": 3}}
    text = "[tool_use write] " + json.dumps(call["input"])
    start = text.index("-----BEGIN")
    end = text.index("KEY-----", start + 40) + len("KEY-----")
    spans = [SecretSpan(0, start, end - start, "private_key", 4)]
    assert PEM in secret_values([text], spans)  # the decoded form is looked for too
    view = MessageView(
        1,
        1,
        "assistant",
        text,
        datetime(2026, 1, 1, tzinfo=UTC),
        (PartView("tool_use", call, "t1", text),),
        "blocks",
    )
    masked = mask_view(view, spans)
    assert masked.parts[0].payload["input"] == {"key": "[secret:private_key#4]", "n": 3}
    assert "MIIEow" not in masked.parts[0].text
    assert "MIIEow" not in masked.content
    assert view.parts[0].payload["input"]["key"] == PEM  # the stored view is left alone
    assert masked.tool_use_ids == ("t1",)

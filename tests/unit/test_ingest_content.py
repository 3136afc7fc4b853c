"""Block validation, text extraction and timestamps: no database needed."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from lcm.content import (
    IMAGE_TOKEN_ESTIMATE,
    IncomingMessage,
    PreparedMessage,
    parse_timestamp,
    prepare_message,
)
from lcm.errors import InvalidInput, TooLarge
from lcm.ingest.service import prepare_batch
from lcm.tokens import estimate_tokens


def prep(content: Any, role: str = "user", **kw: Any) -> PreparedMessage:
    return prepare_message(IncomingMessage(role, content, **kw), "m", 1_000_000)


def test_string_content_is_one_text_part_and_keeps_its_shape() -> None:
    m = prep("hello world")
    assert m.content == "hello world"
    assert m.content_shape == "text"
    assert [p.payload for p in m.parts] == [{"type": "text", "text": "hello world"}]
    assert m.token_count == estimate_tokens("hello world")


def test_blocks_are_kept_in_order_as_sent() -> None:
    blocks = [
        {"type": "thinking", "thinking": "let me look", "signature": "sig"},
        {"type": "text", "text": "Listing."},
        {"type": "tool_use", "id": "tu_1", "name": "ls", "input": {"path": "/tmp"}},
    ]
    m = prep(blocks, role="assistant")
    assert m.content_shape == "blocks"
    assert [p.payload for p in m.parts] == blocks
    assert [p.part_type for p in m.parts] == ["thinking", "text", "tool_use"]
    assert m.parts[2].tool_call_id == "tu_1"
    assert "let me look" in m.content
    assert "Listing." in m.content
    assert "/tmp" in m.content


def test_tool_result_text_and_pairing_id() -> None:
    m = prep(
        [
            {
                "type": "tool_result",
                "tool_use_id": "tu_1",
                "content": [
                    {"type": "text", "text": "a.txt"},
                    {"type": "image", "source": {"type": "url"}},
                ],
            }
        ]
    )
    assert m.parts[0].tool_call_id == "tu_1"
    assert m.content == "a.txt\n[image]"


def test_image_counts_a_flat_token_estimate() -> None:
    m = prep(
        [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]
    )
    assert m.token_count == IMAGE_TOKEN_ESTIMATE + estimate_tokens("[image]")


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ([{"type": "nope"}], "type must be one of"),
        (["just a string"], "must be an object"),
        ([{"type": "text"}], "text must be a string"),
        ([{"type": "tool_use", "name": "x", "input": {}}], "id must be a string"),
        ([{"type": "tool_use", "id": "a", "name": "x", "input": []}], "input must be an object"),
        ([{"type": "tool_result"}], "tool_use_id must be a string"),
        ([{"type": "tool_result", "tool_use_id": "a", "is_error": "yes"}], "is_error"),
        ([{"type": "image"}], "source must be an object"),
        (42, "must be a string or a list"),
    ],
)
def test_malformed_blocks_are_refused_with_the_field_named(content: object, fragment: str) -> None:
    with pytest.raises(InvalidInput) as err:
        prep(content)
    assert fragment in err.value.message
    assert err.value.message.startswith("m")


@pytest.mark.parametrize("bad", ["a\x00b", "a\ud800b", "\udfff"])
def test_unstorable_text_is_refused_anywhere(bad: str) -> None:
    for content in (
        bad,
        [{"type": "text", "text": bad}],
        [{"type": "tool_use", "id": "t", "name": "n", "input": {"k": [bad]}}],
    ):
        with pytest.raises(InvalidInput) as err:
            prep(content)
        assert err.value.code == "invalid_text"
    with pytest.raises(InvalidInput):
        prep("fine", client_id=bad)


def test_unknown_role_is_refused() -> None:
    with pytest.raises(InvalidInput, match="role must be one of"):
        prep("x", role="robot")


def test_timestamps() -> None:
    assert parse_timestamp("2026-01-02T03:04:05Z", "t") == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert parse_timestamp("2026-01-02T03:04:05", "t") == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert parse_timestamp("2026-01-02T05:04:05+02:00", "t") == datetime(
        2026, 1, 2, 3, 4, 5, tzinfo=UTC
    )
    assert parse_timestamp(1_767_323_045, "t") == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert parse_timestamp(1_767_323_045_000, "t") == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    for bad in ("yesterday", "2026-13-01", True, 1e300):
        with pytest.raises(InvalidInput):
            parse_timestamp(bad, "t")


def test_batch_limits() -> None:
    with pytest.raises(TooLarge):
        prepare_batch([IncomingMessage("user", "x")] * 3, max_batch=2, max_chars=10)
    with pytest.raises(TooLarge):
        prepare_batch([IncomingMessage("user", "x" * 11)], max_batch=2, max_chars=10)
    with pytest.raises(InvalidInput, match=r"messages\[1\]"):
        prepare_batch(
            [IncomingMessage("user", "ok"), IncomingMessage("user", [{"type": "x"}])],
            max_batch=5,
            max_chars=10,
        )

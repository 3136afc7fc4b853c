"""Alternation, tool pairing, thinking and the first message."""

from __future__ import annotations

from typing import Any

from lcm.assembly import api_violations
from lcm.assembly.normalize import (
    MISSING_RESULT_TEXT,
    PLACEHOLDER_TEXT,
    normalize_turns,
)
from lcm.assembly.render import Turn
from lcm.tokens import estimate_tokens


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def use(call_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": "read", "input": {}}


def result(call_id: str, content: Any = "out") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content}


def thinking(signed: bool = True) -> dict[str, Any]:
    block = {"type": "thinking", "thinking": "hmm"}
    return {**block, "signature": "sig"} if signed else block


def user(*blocks: dict[str, Any]) -> Turn:
    return Turn("user", list(blocks))


def assistant(*blocks: dict[str, Any]) -> Turn:
    return Turn("assistant", list(blocks))


def normalize(*turns: Turn) -> list[dict[str, Any]]:
    messages, _ = normalize_turns(list(turns))
    assert api_violations(messages) == []
    return messages


def test_consecutive_same_role_turns_are_merged() -> None:
    messages = normalize(
        user(text("a")), user(text("b")), assistant(text("c")), assistant(text("d"))
    )
    assert messages == [
        {"role": "user", "content": [text("a"), text("b")]},
        {"role": "assistant", "content": [text("c"), text("d")]},
    ]


def test_an_opening_assistant_message_gets_a_placeholder_user_message() -> None:
    messages, added = normalize_turns([assistant(text("hello")), user(text("hi"))])
    assert messages[0] == {"role": "user", "content": [text(PLACEHOLDER_TEXT)]}
    assert added == estimate_tokens(PLACEHOLDER_TEXT)
    assert api_violations(messages) == []


def test_orphan_tool_result_becomes_text_that_keeps_its_output() -> None:
    # The call was summarized away; its result is still raw.
    messages = normalize(user(result("gone", [text("line 1"), {"type": "image"}]), text("next")))
    blocks = messages[0]["content"]
    assert [b["type"] for b in blocks] == ["text", "text"]
    assert "gone" in blocks[0]["text"]
    assert "line 1\n[image]" in blocks[0]["text"]


def test_result_for_a_call_two_messages_back_is_an_orphan() -> None:
    messages = normalize(
        user(text("go")), assistant(use("a")), user(text("wait")), assistant(text("ok")),
        user(result("a")),
    )  # fmt: skip
    assert messages[2]["content"][0]["type"] == "tool_result"  # synthetic, for "a"
    assert messages[2]["content"][0]["is_error"] is True
    assert messages[4]["content"][0]["type"] == "text"


def test_missing_result_gets_a_synthetic_error_result() -> None:
    messages, added = normalize_turns(
        [user(text("go")), assistant(use("a"), use("b")), user(result("b"), text("more"))]
    )
    assert api_violations(messages) == []
    blocks = messages[2]["content"]
    assert [b.get("tool_use_id") for b in blocks] == ["a", "b", None]
    assert blocks[0] == {
        "type": "tool_result",
        "tool_use_id": "a",
        "is_error": True,
        "content": MISSING_RESULT_TEXT,
    }
    assert added > 0


def test_trailing_tool_use_is_left_for_the_gateway_to_answer() -> None:
    messages = normalize(user(text("go")), assistant(text("reading"), use("a")))
    assert messages[-1]["content"] == [text("reading"), use("a")]


def test_duplicate_results_keep_the_first_only() -> None:
    messages = normalize(
        user(text("go")), assistant(use("a")), user(result("a", "1"), result("a", "2"))
    )
    blocks = messages[2]["content"]
    assert blocks[0] == result("a", "1")
    assert blocks[1]["type"] == "text"
    assert blocks[1]["text"].endswith("2")


def test_tool_results_come_first_in_a_user_message() -> None:
    messages = normalize(
        user(text("go")), assistant(use("a")), user(text("note")), user(result("a"))
    )
    assert [b["type"] for b in messages[2]["content"]] == ["tool_result", "text"]


def test_thinking_is_kept_only_in_the_last_assistant_message() -> None:
    messages = normalize(
        user(text("q1")),
        assistant(thinking(), text("a1")),
        user(text("q2")),
        assistant(text("a2"), thinking(), use("t")),
        user(result("t")),
        assistant(thinking(), thinking(signed=False), text("a3")),
    )
    assert messages[1]["content"] == [text("a1")]
    assert messages[3]["content"] == [text("a2"), use("t")]
    assert messages[5]["content"] == [thinking(), text("a3")]


def test_kept_thinking_moves_to_the_front_of_a_merged_message() -> None:
    redacted = {"type": "redacted_thinking", "data": "xyz"}
    messages = normalize(user(text("q")), assistant(text("a")), assistant(redacted, use("t")))
    assert messages[1]["content"] == [redacted, text("a"), use("t")]


def test_an_older_thinking_only_message_disappears_and_neighbours_merge() -> None:
    messages = normalize(
        user(text("q1")), assistant(thinking()), user(text("q2")), assistant(text("a2"))
    )
    assert messages == [
        {"role": "user", "content": [text("q1"), text("q2")]},
        {"role": "assistant", "content": [text("a2")]},
    ]


def test_input_turns_are_not_modified() -> None:
    original = [assistant(use("a")), user(text("x"))]
    normalize_turns(original)
    assert original[1].blocks == [text("x")]


def test_api_violations_reports_what_the_api_would_refuse() -> None:
    bad: list[dict[str, Any]] = [
        {"role": "assistant", "content": [text("a")]},
        {"role": "assistant", "content": [thinking(), use("a"), {"type": "image"}]},
        {"role": "user", "content": [text(" "), result("zzz")]},
        {"role": "assistant", "content": [text("b"), thinking()]},
        {"role": "user", "content": []},
    ]
    problems = "\n".join(api_violations(bad))
    for fragment in (
        "role 'assistant', expected 'user'",
        "'image' block not allowed",
        "tool_use a has no tool_result",
        "blank text block",
        "tool_result blocks must come first",
        "tool_result zzz has no tool_use",
        "thinking blocks outside the last assistant message",
        "thinking blocks must come first",
        "non-empty list",
    ):
        assert fragment in problems

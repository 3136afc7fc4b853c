"""A response sent with part of its body already encoded reads as the plain one."""

from __future__ import annotations

from typing import Any

import pytest

from api.contract import AssembleOut
from api.responses import model_response, model_response_with_json
from lcm.assembly.assembler import AssembledContext

MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "content": [{"type": "text", "text": 'naïve "quotes" \\ 東京 \u2028 😀'}]},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "input": {"n": 1.5}}]},
    {"role": "user", "content": '"messages":[] in the text'},
]


def body(messages: list[dict[str, Any]]) -> AssembleOut:
    return AssembleOut.model_construct(
        conversation_id=7,
        token_budget=1000,
        messages=messages,
        estimated_tokens=42,
        summary_count=0,
        fresh_tail_count=3,
        fresh_tail_overflow=False,
        system_prompt_addition='"messages":[]',
        message_times=None,
        recalled=[],
    )


def test_the_spliced_body_is_the_plain_one_byte_for_byte() -> None:
    assembled = AssembledContext(MESSAGES, 42, 0, 3, False, 0)
    spliced = model_response_with_json(body([]), "messages", assembled.messages_json())
    assert spliced.body == model_response(body(MESSAGES)).body
    assert assembled.messages_json() is assembled.messages_json()  # encoded once


def test_a_field_that_is_not_an_empty_list_is_refused() -> None:
    with pytest.raises(ValueError, match="not an empty list"):
        model_response_with_json(body(MESSAGES), "messages", b"[]")

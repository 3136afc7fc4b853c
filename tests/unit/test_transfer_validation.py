"""An export is checked whole before import: records, references and the DAG's shape."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lcm.errors import InvalidInput, TooLarge
from lcm.tokens import estimate_tokens
from lcm.transfer.validation import parse_export

T = "2026-01-01T00:00:00Z"


def message(seq: int, text: str = "hello there") -> dict[str, Any]:
    return {
        "type": "message",
        "seq": seq,
        "role": "user",
        "content": text,
        "content_shape": "text",
        "token_count": 1,
        "created_at": T,
        "client_id": None,
        "parts": [],
    }


def leaf(sid: str, seqs: list[int]) -> dict[str, Any]:
    return {
        "type": "summary",
        "id": sid,
        "kind": "leaf",
        "depth": 0,
        "content": "what happened",
        "token_count": 999,
        "source_token_count": 0,
        "earliest_at": T,
        "latest_at": T,
        "descendant_count": len(seqs),
        "file_ids": [],
        "created_at": T,
        "escalation": "normal",
        "model": "m",
        "message_seqs": seqs,
    }


def item(ordinal: int, **ref: Any) -> dict[str, Any]:
    kind = "summary" if "summary_id" in ref else "message"
    return {"type": "context_item", "ordinal": ordinal, "item_type": kind, "token_count": 0, **ref}


HEADER = {
    "type": "conversation",
    "session_key": "k",
    "session_id": None,
    "archived_at": None,
    "created_at": T,
}
S1 = "sum_" + "1" * 16


def valid() -> list[dict[str, Any]]:
    return [
        HEADER,
        message(1),
        message(2),
        message(3),
        leaf(S1, [1, 2]),
        item(1, summary_id=S1),
        item(3, message_seq=3),
    ]


def parse(records: list[dict[str, Any]], max_chars: int = 1_000) -> Any:
    return parse_export([json.dumps(r) for r in records], max_message_chars=max_chars)


def test_a_valid_export_gets_recomputed_counts() -> None:
    export = parse(valid())
    assert [m.token_count for m in export.messages] == [estimate_tokens("hello there")] * 3
    assert [len(m.parts) for m in export.messages] == [1, 1, 1]
    assert export.summaries[0].token_count == estimate_tokens("what happened")


@pytest.mark.parametrize(
    ("change", "line", "reason"),
    [
        (lambda r: r.append(item(9)), 8, "names exactly one"),
        (lambda r: r.insert(2, message(1)), 3, "repeats line 2"),
        (lambda r: r[4]["message_seqs"].append(1), 5, "twice"),
        (lambda r: r.__setitem__(6, item(1, message_seq=3)), 7, "repeats line 6"),
        (lambda r: r.__setitem__(6, item(3, message_seq=1)), 2, "reachable twice"),
        (lambda r: r.pop(6), 4, "not reachable"),
        (lambda r: r[4].update(depth=1), 5, "depth 0"),
        (lambda r: r[1].update(seq=2**63), 2, "not an export record"),
        (lambda r: r[4].update(token_count=10**20), 5, "not an export record"),
    ],
)
def test_a_bad_export_names_its_line(change: Any, line: int, reason: str) -> None:
    records = valid()
    change(records)
    with pytest.raises(InvalidInput) as raised:
        parse(records)
    assert f"line {line}" in str(raised.value)
    assert reason in str(raised.value)


def test_a_message_over_the_limit_is_too_large() -> None:
    records = valid()
    records[1]["content"] = "x" * 1_001
    with pytest.raises(TooLarge, match="line 2"):
        parse(records)

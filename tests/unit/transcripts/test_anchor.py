"""Anchor rules and the checkpoint, without a database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from lcm.transcripts import parse_transcript
from lcm.transcripts.anchor import (
    StoredMessage,
    by_content,
    by_ids,
    identity,
    unanchored,
)
from lcm.transcripts.checkpoint import Checkpoint, next_checkpoint

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def stored(seq: int, role: str, content: str) -> StoredMessage:
    return StoredMessage(seq, role, content, T0 + timedelta(minutes=seq))


def test_by_ids_anchors_on_the_newest_stored_id() -> None:
    ids = ["a", "b", "c", "d", "e"]
    plan = by_ids(ids, {"a": 1, "c": 7})
    assert plan is not None
    assert (plan.anchor, plan.anchor_index, plan.anchor_seq) == ("id", 2, 7)
    assert plan.indices == (3, 4)
    assert by_ids(ids, {"e": 9}).indices == ()  # type: ignore[union-attr]
    assert by_ids(ids, {}) is None


def test_by_content_needs_the_preceding_messages_to_agree() -> None:
    texts = [("user", "hi"), ("assistant", "ok"), ("user", "deploy"), ("assistant", "ok")]
    idents = [identity(r, t) for r, t in texts] + [identity("user", "next")]
    # Stored: ... "deploy", "ok" -> the anchor is the second "ok" (index 3), not the first.
    newest_first = [stored(12, "assistant", "ok"), stored(11, "user", "deploy")]
    plan = by_content(idents, newest_first)
    assert plan is not None
    assert (plan.anchor_index, plan.anchor_seq) == (3, 12)
    assert plan.indices == (4,)
    # A lone "ok" whose predecessor disagrees is not an anchor...
    assert by_content(idents, [stored(5, "assistant", "ok"), stored(4, "user", "other")]) is None
    # ...but an older stored message that does agree is.
    older = [
        stored(9, "assistant", "zzz"),
        stored(8, "user", "deploy"),
        stored(7, "assistant", "ok"),
    ]
    plan = by_content(idents, older)
    assert plan is not None
    assert (plan.anchor_index, plan.anchor_seq) == (2, 8)


def test_identity_folds_tool_into_user_and_whitespace() -> None:
    assert identity("tool", "a  b\n") == identity("user", "a b")
    assert identity("assistant", "a b") != identity("user", "a b")


def test_unanchored_is_everything_when_empty_and_bounded_otherwise() -> None:
    stamps = [T0 + timedelta(minutes=i) for i in range(10)]
    assert unanchored(stamps, None, 3).indices == tuple(range(10))
    plan = unanchored(stamps, T0 + timedelta(minutes=4), 3)
    assert (plan.anchor, plan.indices) == ("none", (7, 8, 9))
    assert unanchored(stamps, T0 + timedelta(minutes=9), 3).indices == ()
    assert unanchored([None, None], T0, 5).indices == (0, 1)


def test_unanchored_tail_stays_within_the_token_bound() -> None:
    stamps = [T0 + timedelta(minutes=i) for i in range(10)]
    tokens = [100, 100, 100, 100, 100, 100, 100, 300, 50, 50]
    after = T0 + timedelta(minutes=4)
    assert unanchored(stamps, after, 10, tokens, 400).indices == (7, 8, 9)
    assert unanchored(stamps, after, 10, tokens, 399).indices == (8, 9)  # no message cut
    assert unanchored(stamps, after, 2, tokens, 10_000).indices == (8, 9)  # both bounds hold
    assert unanchored(stamps, after, 10, tokens, 49).indices == ()
    assert unanchored(stamps, None, 10, tokens, 1).indices == tuple(range(10))  # empty: all


def test_checkpoint_resumes_only_on_the_same_prefix() -> None:
    data = b'{"type":"session","version":3,"id":"s1"}\n{"type":"label","id":"x","parentId":null}\n'
    parsed = parse_transcript(data)
    checkpoint = next_checkpoint(data, parsed, 42, 0)
    again = Checkpoint.from_json(checkpoint.to_json())
    assert again == checkpoint
    resume = checkpoint.resume_point(data + b'{"type":"label"}\n', "auto")
    assert resume is not None
    assert (resume.offset, resume.version) == (len(data), 3)
    assert checkpoint.resume_point(data.replace(b"s1", b"s2"), "auto") is None  # rewritten
    assert checkpoint.resume_point(data[:-5], "auto") is None  # shorter
    assert checkpoint.resume_point(data, "claude-code") is None  # another format asked for
    assert Checkpoint.from_json({"v": 99}) is None
    assert Checkpoint.from_json(None) is None

"""Masking: spans become stable placeholders, whatever their order, overlap or script."""

from __future__ import annotations

from lcm.content import IncomingMessage, prepare_message
from lcm.secrets.detector import detect
from lcm.secrets.masking import SecretSpan, content_spans, mask_message, mask_parts, mask_text
from lcm.secrets.service import SecretScan, mask_detected


def span(
    offset: int, length: int, kind: str = "aws_key", ordinal: int = 1, part: int = 0
) -> SecretSpan:
    return SecretSpan(part, offset, length, kind, ordinal)


def test_a_span_becomes_its_placeholder() -> None:
    text = "key=AKIAABCDEFGHIJKLMNOP done"
    assert mask_text(text, [span(4, 20, ordinal=3)]) == "key=[secret:aws_key#3] done"


def test_spans_in_any_order_and_none() -> None:
    text = "a=SECRET1 b=SECRET2"
    spans = [span(12, 7, "credential", 2), span(2, 7, "credential", 1)]
    assert mask_text(text, spans) == "a=[secret:credential#1] b=[secret:credential#2]"
    assert mask_text(text, []) == text


def test_overlapping_spans_mask_their_union_under_the_first() -> None:
    text = "0123456789abcdef"
    spans = [span(2, 6, "jwt", 1), span(5, 6, "bearer_token", 2), span(3, 2, "credential", 3)]
    assert mask_text(text, spans) == "01[secret:jwt#1]bcdef"
    # Same start: the longer one names the range.
    assert mask_text(text, [span(2, 2, "a", 1), span(2, 5, "b", 2)]) == "01[secret:b#2]789abcdef"


def test_a_stale_span_never_raises_nor_leaves_a_tail_visible() -> None:
    assert mask_text("short sk-secret", [span(6, 50)]) == "short [secret:aws_key#1]"
    assert mask_text("short", [span(40, 5)]) == "short"
    assert mask_text("short", [span(1, 0)]) == "short"


def test_unicode_offsets_are_code_points() -> None:
    text = "🙂 日本 token=s3cr3tv4lue 🙂"
    start = text.index("s3cr3t")
    masked = mask_text(text, [span(start, len("s3cr3tv4lue"), "credential", 1)])
    assert masked == "🙂 日本 token=[secret:credential#1] 🙂"


def test_multi_part_message_masks_each_part_and_joins_like_content() -> None:
    key = "ghp_" + "x1Y2" * 9
    incoming = IncomingMessage(
        "assistant",
        [
            {"type": "text", "text": "Running it"},
            {"type": "tool_use", "id": "t1", "name": "bash", "input": {"cmd": f"export T={key}"}},
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": "AA=="},
            },
            {"type": "text", "text": f"token {key} set"},
        ],
    )
    message = prepare_message(incoming, "m", 100_000)
    texts = [p.text for p in message.parts]
    spans = [
        SecretSpan(i, f.start, f.length, f.kind, 1) for i, t in enumerate(texts) for f in detect(t)
    ]
    assert {s.part for s in spans} == {1, 3}
    masked = mask_parts(texts, spans)
    assert masked[0] == "Running it"
    assert masked[2] == "[image]"
    assert key not in "".join(masked)
    assert masked[3] == "token [secret:github_token#1] set"
    content = mask_message(texts, spans)
    assert key in message.content
    assert key not in content
    assert content == "\n".join(masked)
    # A span of one part never touches another part's text.
    assert mask_parts(["abcdef", "abcdef"], [span(1, 2, part=1)]) == [
        "abcdef",
        "a[secret:aws_key#1]def",
    ]


def test_fingerprints_are_keyed_per_conversation_and_never_the_value() -> None:
    unkeyed, keyed = SecretScan(), SecretScan(key=b"k" * 32)
    fp = unkeyed.fingerprint("t1", 7, "hunter22")
    assert fp == unkeyed.fingerprint("t1", 7, "hunter22")
    assert "hunter22" not in fp
    assert len(fp) == 64
    assert fp != unkeyed.fingerprint("t1", 8, "hunter22")  # nothing links two conversations
    assert fp != unkeyed.fingerprint("t2", 7, "hunter22")
    assert fp != keyed.fingerprint("t1", 7, "hunter22")


def test_part_spans_move_onto_the_joined_content() -> None:
    texts = ["see", "", "[image]", "a=SECRET", "tail SECRET"]
    spans = [span(2, 6, "credential", 1, part=3), span(5, 6, "credential", 1, part=4)]
    moved = content_spans([len(t) for t in texts], spans)
    content = "\n".join(t for t in texts if t)
    assert [content[s.offset : s.end] for s in moved] == ["SECRET", "SECRET"]
    assert mask_text(content, moved) == mask_message(texts, spans)
    assert {s.part for s in moved} == {None}
    # A span naming a part the message lacks (or an empty one) is dropped.
    assert content_spans([3, 0], [span(0, 2, part=1), span(0, 2, part=7)]) == []


def test_text_no_span_describes_is_masked_by_detection_unnumbered() -> None:
    key = "AKIA" + "K3" * 8
    assert mask_detected(f"the key {key} leaked") == "the key [secret:aws_key] leaked"
    assert mask_detected("nothing secret here, commit 3f2a9c1e8b7d") == (
        "nothing secret here, commit 3f2a9c1e8b7d"
    )

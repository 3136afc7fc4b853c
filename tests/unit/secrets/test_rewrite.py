"""Erasure's rewrite of one text: placeholders in, every span moved onto the new text."""

from __future__ import annotations

from lcm.context import MessageView
from lcm.db.models import SecretSpan as SpanRow
from lcm.secret_access.rewrite import rewrite_part
from lcm.secrets import SecretSpan, erased_since, is_placeholder, placeholder

AWS = "AKIAABCDEFGHIJKLMNOP"
GH = "ghp_" + "a1B2" * 9


def row(span_id: int, text: str, value: str, kind: str, ordinal: int, start: int = 0) -> SpanRow:
    at = text.index(value, start)
    return SpanRow(
        id=span_id, char_offset=at, char_length=len(value), kind=kind, ordinal=ordinal, part=0
    )


def test_the_erased_value_becomes_its_placeholder_and_the_others_move() -> None:
    text = f"a={AWS} b={GH} c={AWS} end"
    first, token, second = (
        row(1, text, AWS, "aws_key", 1),
        row(2, text, GH, "github_token", 2),
        row(3, text, AWS, "aws_key", 1, start=text.index(GH)),
    )
    out = rewrite_part(text, [first, token, second], {1, 3})
    assert out.text == f"a=[secret:aws_key#1] b={GH} c=[secret:aws_key#1] end"
    assert out.values == {AWS: "[secret:aws_key#1]"}
    assert out.also_erased == set()
    for span in (first, second):
        assert out.text[span.char_offset : span.char_offset + span.char_length] == (
            "[secret:aws_key#1]"
        )
    assert out.text[token.char_offset : token.char_offset + token.char_length] == GH


def test_a_span_overlapping_an_erased_one_goes_with_it() -> None:
    text = f"x {AWS}{GH} y"
    aws = row(1, text, AWS, "aws_key", 1)
    wide = SpanRow(
        id=2, char_offset=aws.char_offset + 4, char_length=30, kind="generic", ordinal=2, part=0
    )
    out = rewrite_part(text, [aws, wide], {1})
    assert AWS[4:] not in out.text
    assert GH[:10] not in out.text
    assert out.also_erased == {2}
    assert out.text.startswith("x [secret:aws_key#1]")
    assert aws.char_offset == wide.char_offset == 2


def test_a_second_rewrite_of_an_erased_text_changes_nothing() -> None:
    text = f"k={AWS}"
    span = row(1, text, AWS, "aws_key", 4)
    once = rewrite_part(text, [span], {1})
    again = rewrite_part(once.text, [span], {1})
    assert again.text == once.text == "k=[secret:aws_key#4]"
    assert is_placeholder(placeholder("aws_key", 4))
    assert not is_placeholder(AWS)


def test_a_plan_read_before_an_erasure_is_caught() -> None:
    """The pass's check: spans moved onto a placeholder, a view still holding the original."""
    from datetime import UTC, datetime

    old = MessageView(1, 1, "user", f"k={AWS}", datetime.now(UTC))
    new = MessageView(1, 1, "user", "k=[secret:aws_key#1]", datetime.now(UTC))
    moved = {1: [SecretSpan(None, 2, len("[secret:aws_key#1]"), "aws_key", 1, erased=True)]}
    assert erased_since({1: old}, moved) == 1
    assert erased_since({1: new}, moved) is None
    live = {1: [SecretSpan(None, 2, len(AWS), "aws_key", 1)]}
    assert erased_since({1: old}, live) is None

"""The token estimate: ~4 characters a token, a wide (CJK) character one token."""

from __future__ import annotations

import pytest

from lcm.tokens import estimate_tokens


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("abc", 1),
        ("abcd", 1),
        ("abcde", 2),
        ("x" * 4_000, 1_000),
        ("日本語", 3),  # wide characters count one each
        ("日本語 and text", 3 + 3),  # 3 wide + 9 narrow (9 / 4, rounded up)
        ("café au lait", 3),  # non-ASCII but not wide: narrow like the rest
        ("—" * 8, 2),
    ],
)
def test_estimate(text: str, expected: int) -> None:
    assert estimate_tokens(text) == expected


def test_ascii_text_and_text_with_a_wide_character_agree() -> None:
    """ASCII text (counted without the pattern) and the same text plus one wide character."""
    narrow = "Checked src/api/handler.py: the retry loop backs off. " * 100  # 5,400 characters
    assert estimate_tokens(narrow) == 1_350
    assert estimate_tokens(narrow + "漢") == 1_351

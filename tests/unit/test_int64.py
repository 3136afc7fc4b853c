"""The one strict reader of integers sent as text."""

from __future__ import annotations

import pytest

from lcm.int64 import INT64_MAX, parse_int64


@pytest.mark.parametrize("raw", ["0", "1", "007", str(INT64_MAX)])
def test_ascii_digits_within_64_bits_are_numbers(raw: str) -> None:
    assert parse_int64(raw) == int(raw)


NOT_NUMBERS = ["", "²", "\u0661", "\uff11", str(INT64_MAX + 1), "9" * 30, "-1", "+1", "1_0"]


@pytest.mark.parametrize("raw", [*NOT_NUMBERS, " 1", "1 ", "1\n", "1.0", "0x1", "1\x00"])
def test_anything_else_is_not(raw: str) -> None:
    assert parse_int64(raw) is None

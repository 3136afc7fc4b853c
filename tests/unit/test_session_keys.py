"""The session-key rule: one NFC form, no character that does not show, escaped display."""

from __future__ import annotations

import unicodedata

import pytest

from lcm.conversations.session_keys import normalized_session_key, printable_session_key
from lcm.errors import InvalidSessionKey


def test_nfd_becomes_nfc() -> None:
    nfd = unicodedata.normalize("NFD", "agent:café")
    assert normalized_session_key(nfd) == unicodedata.normalize("NFC", "agent:café")
    assert normalized_session_key("agent:main/tool 1") == "agent:main/tool 1"


@pytest.mark.parametrize(
    ("char", "what"),
    [
        ("\x00", "control"),
        ("\x1f", "control"),
        ("\u009b", "control"),
        ("\u200b", "zero-width"),
        ("\u2060", "zero-width"),
        ("\ufeff", "zero-width"),
        ("\u202d", "bidirectional"),
        ("\u2068", "bidirectional"),
        ("\u061c", "format"),  # ARABIC LETTER MARK
        ("\u00ad", "format"),
    ],
)
def test_invisible_characters_are_refused_by_class(char: str, what: str) -> None:
    with pytest.raises(InvalidSessionKey, match=what) as refused:
        normalized_session_key(f"ab{char}")
    assert refused.value.code == "invalid_session_key"
    assert "at offset 2" in refused.value.message


def test_printable_keys_show_as_they_are_and_others_escaped() -> None:
    assert printable_session_key("agent:café/x y") == "agent:café/x y"
    assert printable_session_key("a\x07b\u200b\U000e0001") == "a\\u0007b\\u200b\\U000e0001"

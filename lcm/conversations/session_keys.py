"""What a session key may hold, its one stored form, and how it is shown.

Two keys that look the same must be the same conversation. So a key is
stored in Unicode NFC (an ``é`` typed as one code point or as ``e`` plus a
combining accent is one key), and a key holding a character that does not
show is refused: control characters (category Cc), zero-width characters
(U+200B to U+200D, U+2060, U+FEFF), bidirectional overrides and isolates
(U+202A to U+202E, U+2066 to U+2069) and every other format character (Cf).
Keys stored before this rule may still hold such characters; the console and
the CLI show them escaped (:func:`printable_session_key`).
"""

from __future__ import annotations

import unicodedata

from lcm.errors import InvalidSessionKey

ZERO_WIDTH = frozenset({0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF})
BIDI_CONTROLS = frozenset({*range(0x202A, 0x202F), *range(0x2066, 0x206A)})


def _refused(char: str) -> str | None:
    """Which refused class ``char`` is in, in words, or None."""
    category = unicodedata.category(char)
    if category == "Cc":
        return "a control character"
    if ord(char) in ZERO_WIDTH:
        return "a zero-width character"
    if ord(char) in BIDI_CONTROLS:
        return "a bidirectional override or isolate"
    if category == "Cf":
        return "a format character"
    return None


def normalized_session_key(raw: str) -> str:
    """``raw`` in NFC; ``InvalidSessionKey`` naming the first character that may not be in a key."""
    for offset, char in enumerate(raw):
        what = _refused(char)
        if what:
            raise InvalidSessionKey(
                f"the session key contains {what} (U+{ord(char):04X}) at offset {offset}; "
                "a session key may not hold control, zero-width, bidirectional or other "
                "format characters"
            )
    return unicodedata.normalize("NFC", raw)


def _escaped(char: str) -> str:
    if char.isprintable():
        return char
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def printable_session_key(key: str) -> str:
    r"""``key`` with every character that does not print shown as ``\uXXXX``."""
    return key if key.isprintable() else "".join(_escaped(char) for char in key)

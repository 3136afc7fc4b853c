"""Opaque keyset cursors: the last key a page showed, tagged with what it pages.

The tag (``"c1:"`` for conversation listings, ``"m1:"`` for a conversation's
messages) makes a cursor handed out by one listing useless to another; the
base64 only keeps clients from building cursors by hand.
"""

from __future__ import annotations

import base64
import binascii

from lcm.errors import InvalidInput


def encode_cursor(tag: str, last_key: int) -> str:
    return base64.urlsafe_b64encode(f"{tag}{last_key}".encode()).decode().rstrip("=")


def decode_cursor(tag: str, cursor: str, refusal: str) -> int:
    """The key ``cursor`` carries; 400 ``invalid_cursor`` (``refusal``) if not one of ``tag``'s."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        if raw.startswith(tag):
            return int(raw[len(tag) :])
    except (binascii.Error, UnicodeDecodeError, ValueError):
        pass
    raise InvalidInput(refusal, code="invalid_cursor")

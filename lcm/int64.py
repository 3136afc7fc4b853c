"""The one strict reader of integers that arrive as text (console forms, query strings, cookies).

Python's ``int()`` accepts far more than a decimal number: Unicode digits
(U+0661, an Arabic-Indic one, is 1, ``"²"`` passes ``isdigit()`` and then fails), underscores,
signs and surrounding blanks; pydantic's lax mode adds ``"1.0"``. And a value
past 64 bits overflows the database driver. Here a number is 1 to 19 ASCII
digits and at most :data:`INT64_MAX`; anything else is not a number.
"""

from __future__ import annotations

import re

INT64_MAX = 2**63 - 1
_DECIMAL = re.compile(r"[0-9]{1,19}")


def parse_int64(raw: str) -> int | None:
    """``raw`` as a non-negative int64, or None unless it is ASCII digits within bounds."""
    if not _DECIMAL.fullmatch(raw):
        return None
    value = int(raw)
    return value if value <= INT64_MAX else None

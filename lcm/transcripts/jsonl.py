"""Reading JSON lines tolerantly, and cleaning text no database can store.

Gateways append to their transcripts while we read them and sometimes crash
mid-line, so a malformed line is counted and skipped rather than failing the
whole import; a last line without its newline is read if it parses, but the
read position stays before it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
REPLACEMENT = "\ufffd"


@dataclass(frozen=True, slots=True)
class Line:
    offset: int  # absolute byte offset of the line in the transcript
    value: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Lines:
    lines: list[Line]
    malformed: int
    total: int
    complete_end: int  # absolute offset just past the last newline read


def read_lines(data: bytes, start: int = 0) -> Lines:
    """The JSON-object lines of ``data[start:]``."""
    lines: list[Line] = []
    malformed = total = 0
    position = start
    complete_end = start
    size = len(data)
    while position < size:
        newline = data.find(b"\n", position)
        end = size if newline < 0 else newline
        raw = data[position:end].strip()
        if raw:
            total += 1
            try:
                value = json.loads(raw)
            except ValueError:
                value = None
            if isinstance(value, dict):
                lines.append(Line(position, value))
            elif newline >= 0:
                malformed += 1
            # else: an unterminated, unparsable last line is still being written.
        if newline < 0:
            break
        position = newline + 1
        complete_end = position
    return Lines(lines, malformed, total, complete_end)


def clean(value: Any) -> Any:
    """``value`` with NUL characters and lone surrogates replaced by U+FFFD.

    The ``/messages`` endpoint refuses such text so that what it stores is
    exactly what was sent; a transcript is converted anyway, and one stray NUL
    in a tool's output must not block importing a whole session.
    """
    if isinstance(value, str):
        return _UNSTORABLE.sub(REPLACEMENT, value) if _UNSTORABLE.search(value) else value
    if isinstance(value, list):
        return [clean(item) for item in value]
    if isinstance(value, dict):
        return {clean(k): clean(v) for k, v in value.items()}
    return value


def as_text(value: Any) -> str:
    """A string field, or ``""`` when absent or of another type."""
    return value if isinstance(value, str) else ""

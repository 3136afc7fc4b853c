"""Reading JSON lines tolerantly, but never storing text altered.

Gateways append to their transcripts while we read them and sometimes crash
mid-line, so a malformed line is counted and skipped rather than failing the
whole import; a last line without its newline is read if it parses, but the
read position stays before it. A line that parses but holds text no database
can store faithfully (NUL, lone surrogates) or nests too deep is refused with
the same 400 as ``/messages`` (``lcm/storable.py``): one rule for all input.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from lcm.errors import InvalidInput
from lcm.storable import check_storable


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
            value = _parse(raw, position)
            if isinstance(value, dict):
                check_storable(value, f"transcript line at byte {position}")
                lines.append(Line(position, value))
            elif newline >= 0:
                malformed += 1
            # else: an unterminated, unparsable last line is still being written.
        if newline < 0:
            break
        position = newline + 1
        complete_end = position
    return Lines(lines, malformed, total, complete_end)


def _parse(raw: bytes, position: int) -> Any:
    """One line's JSON value, or None when it does not parse."""
    try:
        return json.loads(raw)
    except ValueError:
        return None
    except RecursionError as exc:
        # The decoder recurses per nesting level; such a line is an attack or
        # a bug upstream, not a transcript, and skipping it would lose it silently.
        raise InvalidInput(
            f"transcript line at byte {position} nests too deep to parse", code="too_deep"
        ) from exc


def as_text(value: Any) -> str:
    """A string field, or ``""`` when absent or of another type."""
    return value if isinstance(value, str) else ""

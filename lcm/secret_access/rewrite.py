"""One stored text rewritten with some of its secrets replaced by their placeholders.

Plain functions over a text and its span rows: the unit tests need no
database. The rows are moved in place (offset and length), so the caller's
flush writes them with the text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from lcm.db.models import SecretSpan
from lcm.secrets import placeholder


@dataclass
class Rewritten:
    text: str
    values: dict[str, str] = field(default_factory=dict)  # each erased value -> placeholder
    also_erased: set[int] = field(default_factory=set)  # spans overlapping an erased one


@dataclass
class _Range:
    start: int
    end: int
    shown: str
    spans: list[SecretSpan]


def rewrite_part(text: str, spans: Sequence[SecretSpan], erase: set[int]) -> Rewritten:
    """``text`` with the spans in ``erase`` replaced by their placeholders.

    A span overlapping an erased one is erased with it (its bytes are in the
    replaced range); overlapping erased spans merge under the placeholder of
    the one starting first, as masking shows them. Every span of the text
    is moved onto the new text: an erased one covers its placeholder, the
    others keep covering their own bytes.
    """
    ordered = sorted(
        (s for s in spans if s.char_length > 0 and s.char_offset < len(text)),
        key=lambda s: (s.char_offset, -s.char_length),
    )
    ranges = _erased_ranges(text, ordered, erase)
    out = Rewritten(text="")
    pieces: list[str] = []
    at = shift = 0
    for r in ranges:
        pieces.append(text[at : r.start])
        new_start = r.start + shift
        pieces.append(r.shown)
        out.values.setdefault(text[r.start : r.end], r.shown)
        for span in r.spans:
            if span.id not in erase:
                out.also_erased.add(span.id)
            span.char_offset, span.char_length = new_start, len(r.shown)
        shift += len(r.shown) - (r.end - r.start)
        at = r.end
    pieces.append(text[at:])
    out.text = "".join(pieces)
    in_ranges = {id(s) for r in ranges for s in r.spans}
    for span in ordered:
        if id(span) not in in_ranges:
            span.char_offset += _shift_before(ranges, span.char_offset)
    return out


def _erased_ranges(text: str, ordered: Sequence[SecretSpan], erase: set[int]) -> list[_Range]:
    """The merged ranges to replace, each with the spans inside it, in order."""
    ranges: list[_Range] = []
    for span in ordered:
        end = min(span.char_offset + span.char_length, len(text))
        if ranges and span.char_offset < ranges[-1].end:
            ranges[-1].spans.append(span)  # overlaps the range before: one with it
            ranges[-1].end = max(ranges[-1].end, end)
        elif span.id in erase:
            shown = placeholder(span.kind, span.ordinal)
            ranges.append(_Range(span.char_offset, end, shown, [span]))
    # A span starting before an erased one but reaching into it was not seen
    # as overlapping above (it came first): fold such spans in.
    for span in ordered:
        end = min(span.char_offset + span.char_length, len(text))
        for r in ranges:
            if span not in r.spans and span.char_offset < r.end and end > r.start:
                r.spans.append(span)
                r.start, r.end = min(r.start, span.char_offset), max(r.end, end)
    return _merged(ranges)


def _merged(ranges: list[_Range]) -> list[_Range]:
    ranges.sort(key=lambda r: r.start)
    merged: list[_Range] = []
    for r in ranges:
        if merged and r.start < merged[-1].end:
            merged[-1].end = max(merged[-1].end, r.end)
            merged[-1].spans.extend(s for s in r.spans if s not in merged[-1].spans)
        else:
            merged.append(r)
    return merged


def _shift_before(ranges: Sequence[_Range], offset: int) -> int:
    """How far text at ``offset`` (outside every range) moved."""
    return sum(len(r.shown) - (r.end - r.start) for r in ranges if r.end <= offset)

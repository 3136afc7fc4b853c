"""Masking: a stored text with its secret spans replaced by stable placeholders.

A placeholder names the kind and the conversation's ordinal of the value,
``[secret:aws_key#3]``, so a model reading masked text can still tell one
key from another and refer to "the key". Offsets count code points (Python
``str`` indices), as the detector reports them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SecretSpan:
    """A secret in a text: ``text[offset : offset + length]``; ``part`` is the part's ordinal."""

    part: int | None
    offset: int
    length: int
    kind: str
    ordinal: int
    # Erased by an admin: the stored text holds the placeholder here now.
    erased: bool = False

    @property
    def end(self) -> int:
        return self.offset + self.length

    @property
    def placeholder(self) -> str:
        return placeholder(self.kind, self.ordinal)


_PLACEHOLDER = re.compile(r"\[secret:[A-Za-z0-9_.-]+(?:#\d+)?\]")


def is_placeholder(text: str) -> bool:
    """Whether ``text`` is exactly one placeholder (what an erased span covers)."""
    return _PLACEHOLDER.fullmatch(text) is not None


def placeholder(kind: str, ordinal: int) -> str:
    """``[secret:kind#n]``; ``[secret:kind]`` for ordinal 0 (a value no span numbers)."""
    return f"[secret:{kind}#{ordinal}]" if ordinal else f"[secret:{kind}]"


def mask_text(text: str, spans: Iterable[SecretSpan]) -> str:
    """``text`` with each span replaced by its placeholder.

    Overlapping spans merge into one masked range under the placeholder of
    the one starting first (the longer on a tie); a span reaching past the
    text's end is cut at it and one starting beyond it is ignored, so a
    stale span never raises and never leaves part of a secret visible.
    """
    ordered = sorted(
        (s for s in spans if s.length > 0 and s.offset < len(text)),
        key=lambda s: (s.offset, -s.length),
    )
    out: list[str] = []
    at = 0
    for span in ordered:
        if span.end <= at:
            continue  # inside a range already masked
        if span.offset >= at:
            out.append(text[at : span.offset])
            out.append(span.placeholder)
        at = max(at, min(span.end, len(text)))
    out.append(text[at:])
    return "".join(out)


def mask_parts(texts: Sequence[str], spans: Iterable[SecretSpan]) -> list[str]:
    """Each part's text masked with the spans naming its ordinal (``part``)."""
    by_part: dict[int, list[SecretSpan]] = {}
    for span in spans:
        if span.part is not None:
            by_part.setdefault(span.part, []).append(span)
    return [mask_text(text, by_part.get(i, ())) for i, text in enumerate(texts)]


def mask_message(texts: Sequence[str], spans: Iterable[SecretSpan]) -> str:
    """A message's ``content`` (its parts' texts joined as ingest joins them), masked.

    The parts are masked one by one and joined the way ``lcm.content``
    builds ``content`` (non-empty texts, newline-separated); a masked
    non-empty text is never empty, so the result is ``content`` masked.
    """
    masked = mask_parts(texts, spans)
    return "\n".join(m for m, t in zip(masked, texts, strict=True) if t)


def content_spans(part_lengths: Sequence[int], spans: Iterable[SecretSpan]) -> list[SecretSpan]:
    """A message's part spans moved onto its joined ``content`` (``part`` becomes None).

    ``part_lengths[i]`` is the length (code points) of part ``i``'s text;
    ``content`` joins the non-empty ones with a newline, so a part starts
    after the earlier non-empty parts and one newline each. A span naming
    no known part is dropped.
    """
    starts: dict[int, int] = {}
    at = 0
    for ordinal, length in enumerate(part_lengths):
        if length:
            starts[ordinal] = at
            at += length + 1
    return [
        SecretSpan(None, starts[s.part] + s.offset, s.length, s.kind, s.ordinal, s.erased)
        for s in spans
        if s.part in starts
    ]


def mask_ranges(
    text: str, spans: Iterable[SecretSpan], ranges: Sequence[tuple[int, int]]
) -> tuple[str, list[tuple[int, int]]]:
    """``text`` masked, and ``ranges`` (offsets into ``text``) moved onto the masked text.

    A range reaching into a secret widens to its whole placeholder, so a
    snippet cut around a match never shows part of a secret: it is cut from
    the masked text.
    """
    # The masked ranges as (start, end) in the original and in the masked text.
    moved: list[tuple[int, int, int, int]] = []
    out: list[str] = []
    at = 0
    for span in sorted(
        (s for s in spans if s.length > 0 and s.offset < len(text)),
        key=lambda s: (s.offset, -s.length),
    ):
        if span.end <= at:
            continue
        if span.offset >= at:
            out.append(text[at : span.offset])
            new_start = sum(map(len, out))
            out.append(span.placeholder)
            moved.append((span.offset, span.end, new_start, new_start + len(span.placeholder)))
        else:  # overlaps the previous one: the masked range grows, its placeholder does not
            start, _end, new_start, new_end = moved[-1]
            moved[-1] = (start, span.end, new_start, new_end)
        at = max(at, min(span.end, len(text)))
    out.append(text[at:])

    def where(offset: int, is_end: bool) -> int:
        shift = 0
        for start, end, new_start, new_end in moved:
            if offset <= start or (is_end and offset == start):
                break
            if offset < end:
                return new_end if is_end else new_start
            shift = new_end - end
        return offset + shift

    return "".join(out), [(where(s, False), where(e, True)) for s, e in ranges]

"""Deterministic truncation: the last step of escalation, which cannot fail.

When neither LLM attempt produced a usable summary (or the provider is down),
the summary is a clipped copy of the source: its beginning and its end, a
visible marker where the middle was cut, and a footer naming what was lost.
The originals stay in the database, so nothing is actually lost.
"""

from __future__ import annotations

from lcm.summarize.footer import derive_topics, footer_line
from lcm.tokens import estimate_tokens

TRUNCATION_MARKER = "[Truncated for context management]"

# Share of the budget given to the start of the source; the rest keeps its end,
# which holds the latest state of the work.
_HEAD_SHARE = 0.6
# Joining parts adds a few newlines and can round each part's estimate up once.
_JOIN_SLACK_TOKENS = 4


def _longest_fitting(text: str, max_tokens: int, *, from_end: bool) -> int:
    """How many characters of ``text`` (from its start, or its end) fit ``max_tokens``.

    The estimate only grows as characters are added, so a binary search finds
    the longest fitting length with O(log n) estimates.
    """
    low, high = 0, len(text)
    while low < high:
        mid = (low + high + 1) // 2
        part = text[len(text) - mid :] if from_end else text[:mid]
        if estimate_tokens(part) <= max_tokens:
            low = mid
        else:
            high = mid - 1
    return low


def clip_to_tokens(text: str, max_tokens: int) -> str:
    """The longest start of ``text`` within ``max_tokens``, cut at a word break when near one."""
    if max_tokens <= 0:
        return ""
    size = _longest_fitting(text, max_tokens, from_end=False)
    if size >= len(text):
        return text
    head = text[:size]
    # Prefer not to cut a word in half, unless that would throw away much text
    # (CJK text has no spaces at all).
    cut = max(head.rfind(" "), head.rfind("\n"))
    return head[:cut] if cut >= size * 0.8 else head


def clip_end_to_tokens(text: str, max_tokens: int) -> str:
    """The longest end of ``text`` within ``max_tokens``, cut at a word break when near one."""
    if max_tokens <= 0:
        return ""
    size = _longest_fitting(text, max_tokens, from_end=True)
    if size >= len(text):
        return text
    tail = text[len(text) - size :]
    breaks = [i for i in (tail.find(" "), tail.find("\n")) if i >= 0]
    cut = min(breaks) if breaks else -1
    return tail[cut + 1 :] if 0 <= cut <= size * 0.2 else tail


def truncate_source(source_text: str, max_tokens: int) -> str:
    """Head and tail of the source, the marker between them, and a derived footer.

    The result's token estimate never exceeds ``max_tokens`` (as long as the
    budget has room for the marker at all).
    """
    source = source_text.strip()
    footer = footer_line(derive_topics(source), max_tokens=max(8, max_tokens // 4))
    overhead = estimate_tokens(TRUNCATION_MARKER) + estimate_tokens(footer) + _JOIN_SLACK_TOKENS
    budget = max(0, max_tokens - overhead)
    if estimate_tokens(source) <= budget:
        # Nothing needs cutting; the marker still says this is not a real summary.
        body = f"{source}\n{TRUNCATION_MARKER}" if source else TRUNCATION_MARKER
        return f"{body}\n\n{footer}"
    head = clip_to_tokens(source, int(budget * _HEAD_SHARE))
    rest = source[len(head) :]
    tail = clip_end_to_tokens(rest, budget - estimate_tokens(head))
    parts = [head.rstrip(), TRUNCATION_MARKER, tail.lstrip()]
    body = "\n".join(part for part in parts if part)
    return f"{body}\n\n{footer}"

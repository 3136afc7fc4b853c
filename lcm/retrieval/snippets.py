"""Highlighted snippets: a window of text around the first match, matches marked.

The same builder serves both modes (RE2 spans for regex, the query's words
for full text) so agents see one snippet format whatever found the row.
"""

from __future__ import annotations

from collections.abc import Sequence

HIGHLIGHT_START = "«"
HIGHLIGHT_END = "»"
ELLIPSIS = "…"
SNIPPET_CHARS = 240


def build_snippet(
    content: str, spans: Sequence[tuple[int, int]], width: int = SNIPPET_CHARS
) -> str:
    """Up to ``width`` characters around the first span, every span inside marked."""
    if not spans:
        return _clip(content, 0, width)
    first_start, first_end = spans[0]
    # Centre the window on the first match, leaving a third of it for context before.
    start = max(0, min(first_start - width // 3, len(content) - width))
    end = min(len(content), max(start + width, first_end))
    pieces = [ELLIPSIS] if start > 0 else []
    cursor = start
    for span_start, span_end in sorted(spans):
        if span_start < cursor or span_end > end or span_end == span_start:
            continue
        pieces += [content[cursor:span_start], HIGHLIGHT_START, content[span_start:span_end]]
        pieces.append(HIGHLIGHT_END)
        cursor = span_end
    pieces.append(content[cursor:end])
    if end < len(content):
        pieces.append(ELLIPSIS)
    return _one_line("".join(pieces))


def _clip(content: str, start: int, width: int) -> str:
    text = content[start : start + width]
    return _one_line(text + (ELLIPSIS if len(content) > start + width else ""))


def _one_line(text: str) -> str:
    return " ".join(text.split())

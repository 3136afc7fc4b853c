"""The fresh tail: the newest raw messages every context keeps verbatim.

Compaction never summarizes it and assembly always shows it, so both take it
from here. Rule chosen where DESIGN §3 is silent (tested in
``tests/unit/compaction/test_fresh_tail.py``):

Counted over the trailing run of raw messages only (a
summary ends it). Starting from the newest message, which always stays,
older messages are added while the tail holds fewer than
``fresh_tail_count`` and, when ``fresh_tail_max_tokens`` is set, while the
tail's tokens stay within it. Then two extensions, both backwards only:
(1) the latest user turn is never split: if the latest message that starts a
user turn (a ``user`` message carrying no tool results) lies in the trailing
run but before the boundary, the tail is extended back to it; (2) the
boundary never separates a ``tool_use`` from its result: while it does, it
moves back one message. The extensions override the count and token caps, so
a long agent loop after one prompt stays verbatim as a whole; the assembler
reports ``fresh_tail_overflow`` when that no longer fits the budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from lcm.context import ContextEntry, MessageView
from lcm.settings import CompactionSettings

__all__ = ["ContextSplit", "fresh_tail_start", "split_fresh_tail", "unsafe_cuts"]


class ContextSplit(NamedTuple):
    """The evictable prefix (everything older) and the verbatim fresh tail."""

    prefix: tuple[ContextEntry, ...]
    tail: tuple[ContextEntry, ...]


def fresh_tail_start(entries: Sequence[ContextEntry], settings: CompactionSettings) -> int:
    """Index of the first fresh-tail entry (``len(entries)`` when the tail is empty)."""
    end = len(entries)
    run_start = end
    while run_start > 0 and entries[run_start - 1].is_message:
        run_start -= 1
    if run_start == end:
        return end

    start = end - 1  # the newest message always stays
    tokens = entries[start].token_count
    cap = settings.fresh_tail_max_tokens
    while start > run_start and end - start < settings.fresh_tail_count:
        cost = entries[start - 1].token_count
        if cap is not None and tokens + cost > cap:
            break
        tokens += cost
        start -= 1

    messages = _messages(entries[run_start:])
    for index in range(end - 1, run_start - 1, -1):
        if messages[index - run_start].starts_user_turn:
            start = min(start, index)
            break

    unsafe = unsafe_cuts(messages)
    while start > run_start and unsafe[start - run_start]:
        start -= 1
    return start


def split_fresh_tail(entries: Sequence[ContextEntry], settings: CompactionSettings) -> ContextSplit:
    start = fresh_tail_start(entries, settings)
    return ContextSplit(tuple(entries[:start]), tuple(entries[start:]))


def unsafe_cuts(messages: Sequence[MessageView]) -> list[bool]:
    """``unsafe[b]``: cutting before ``messages[b]`` separates a tool call from its result.

    Has ``len(messages) + 1`` items; cuts at either end are always safe because
    only pairs with both halves inside ``messages`` count.
    """
    # Difference array: a pair (use at u, result at r) marks the cuts u+1..r.
    marks = [0] * (len(messages) + 2)
    first_use: dict[str, int] = {}
    for index, message in enumerate(messages):
        for call_id in message.tool_result_ids:
            use = first_use.get(call_id)
            if use is not None and use < index:
                marks[use + 1] += 1
                marks[index + 1] -= 1
        for call_id in message.tool_use_ids:
            first_use.setdefault(call_id, index)
    unsafe: list[bool] = []
    open_pairs = 0
    for cut in range(len(messages) + 1):
        open_pairs += marks[cut]
        unsafe.append(open_pairs > 0)
    return unsafe


def _messages(entries: Sequence[ContextEntry]) -> list[MessageView]:
    return [e.message for e in entries if e.message is not None]

"""What a pass hands the summarizer, and the shape of the summary it writes.

The summarizer's input is the planned range rendered as text (messages with
their times, or child summaries with their spans). The summary's wrapper
(``<summary …>`` with its attributes) is known before the summary exists, so
a pass can tell the summarizer what it must come in under
(:func:`wrapper_tokens`).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from datetime import datetime

from lcm.assembly import summary_context_tokens
from lcm.compaction.hygiene import strip_injected_context
from lcm.compaction.planning import PassPlan
from lcm.context import MessageView, SummaryView
from lcm.policy.timestamps import format_timestamp
from lcm.secrets.masking import SecretSpan, mask_text
from lcm.timezones import DEFAULT_TIMEZONE


def new_summary_id() -> str:
    return "sum_" + secrets.token_hex(8)


def render_source(
    plan: PassPlan,
    strip_tags: Sequence[str] = (),
    timezone: str = DEFAULT_TIMEZONE,
    masks: Mapping[int, Sequence[SecretSpan]] | None = None,
) -> str:
    """The summarizer's input: messages with timestamps, or child summaries with spans.

    Blocks of ``strip_tags`` (injected plugin context) are left out of message
    text, times written in ``timezone``, and the secrets of ``masks`` (message
    id -> content spans) replaced by their placeholders: the text leaves for a
    third-party model.
    """
    messages = [e.message for e in plan.entries if e.message is not None]
    summaries = [e.summary for e in plan.entries if e.summary is not None]
    if messages:
        return render_messages(messages, strip_tags, timezone, masks)
    return render_summaries(summaries, timezone)


def render_messages(
    messages: Sequence[MessageView],
    strip_tags: Sequence[str] = (),
    timezone: str = DEFAULT_TIMEZONE,
    masks: Mapping[int, Sequence[SecretSpan]] | None = None,
) -> str:
    """A leaf's input: each message with its time, role and sequence number.

    Masked before the injected context is stripped: the spans count offsets
    in the stored content.
    """
    masks = masks or {}
    return "\n\n".join(
        f"[{format_timestamp(m.created_at, timezone)}] {m.role} (#{m.seq}): "
        f"{strip_injected_context(mask_text(m.content, masks.get(m.id, ())), strip_tags)}"
        for m in messages
    )


def render_summaries(summaries: Sequence[SummaryView], timezone: str = DEFAULT_TIMEZONE) -> str:
    """A condensed summary's input: each child summary with its time span."""
    return "\n\n".join(
        f"[{format_timestamp(s.earliest_at, timezone)} .."
        f" {format_timestamp(s.latest_at, timezone)}]"
        f" summary {s.id} (depth {s.depth}):\n{s.content}"
        for s in summaries
    )


def summary_span(plan: PassPlan) -> tuple[datetime, datetime, int]:
    """The summary's earliest and latest times and its descendant count."""
    if plan.kind == "leaf":
        times = [e.message.created_at for e in plan.entries if e.message is not None]
        return min(times), max(times), len(times)
    parents = [e.summary for e in plan.entries if e.summary is not None]
    return (
        min(p.earliest_at for p in parents),
        max(p.latest_at for p in parents),
        sum(p.descendant_count for p in parents),
    )


StoredRange = tuple[int | None, int | None, int | None]
"""A summary's stored source range: message count, first seq, last seq (``None``: unknown)."""


def leaf_range(seqs: Sequence[int]) -> StoredRange:
    """A leaf's range: its messages."""
    return len(seqs), min(seqs, default=None), max(seqs, default=None)


def union_ranges(parents: Sequence[StoredRange]) -> StoredRange:
    """A condensed summary's range: the union of its parents' (disjoint: each summary
    is condensed once). Unknown if one parent's is (written before migration 0030)."""
    if any(count is None for count, _, _ in parents):
        return None, None, None
    firsts = [first for _, first, _ in parents if first is not None]
    lasts = [last for _, _, last in parents if last is not None]
    return sum(c or 0 for c, _, _ in parents), min(firsts, default=None), max(lasts, default=None)


def wrapper_tokens(plan: PassPlan) -> int:
    """What the summary ``plan`` writes costs in the context before its text.

    The ``<summary …>`` element with this plan's attributes (and a condensed
    summary's parent list) around an empty text.
    """
    earliest, latest, descendants = summary_span(plan)
    empty = SummaryView(
        id=new_summary_id(),
        kind=plan.kind,
        depth=plan.depth,
        content="",
        token_count=0,
        earliest_at=earliest,
        latest_at=latest,
        descendant_count=descendants,
        parent_ids=plan.summary_ids,
    )
    return summary_context_tokens(empty)

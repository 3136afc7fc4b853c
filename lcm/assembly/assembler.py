"""Assembling the model's context for one turn from context entries and a budget.

The fresh tail is always included verbatim. The budget left after it is
filled newest-first from the evictable prefix (everything before the tail),
stopping at the first entry that does not fit, so the model sees one
unbroken, recent stretch of history rather than a scatter of whatever was
small. The result is then normalized for the Messages API
(:mod:`lcm.assembly.normalize`); while the text the repairs add pushes it
over the budget, the oldest included prefix entries are dropped and it is
rebuilt.

Heartbeat cycles and old tool payloads may be left out or stubbed first
(:mod:`lcm.assembly.hygiene`, both off by default).

When the fresh tail alone (with its repairs) exceeds the budget, it is still
returned whole, with no prefix, and ``fresh_tail_overflow`` says so: the
caller decides whether to compact harder or truncate, never this function.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lcm.assembly.hygiene import stub_tool_payloads, without_heartbeat_turns
from lcm.assembly.normalize import normalized_turns, provider_messages
from lcm.assembly.render import RenderedEntry, TimeSpan, Turn, render_entry
from lcm.context import ContextEntry
from lcm.policy.fresh_tail import split_fresh_tail
from lcm.settings import CompactionSettings


@dataclass(frozen=True, slots=True)
class AssembledContext:
    """Messages in Anthropic format and what went into them.

    ``estimated_tokens`` is the stored token counts of the included messages,
    the rendered size of the included summaries and the text repairs added.
    """

    messages: list[dict[str, Any]]
    estimated_tokens: int
    summary_count: int
    fresh_tail_count: int
    fresh_tail_overflow: bool
    evicted_count: int
    # Assembled with ``times``: the normalized turns ``messages`` were built
    # from, one each, whose spans ``message_spans`` reads.
    turns: list[Turn] | None = field(default=None, repr=False, compare=False)

    def message_spans(self) -> list[TimeSpan]:
        """The times each of ``messages`` covers, in the same order (assembled with ``times``)."""
        if self.turns is None:
            raise ValueError("assembled without times")
        spans: list[TimeSpan] = []
        for turn in self.turns:
            if turn.span is None:  # render_entry gives every turn one
                raise ValueError(f"an assembled {turn.role} turn has no time span")
            spans.append(turn.span)
        return spans


def assemble_context(
    entries: Sequence[ContextEntry],
    token_budget: int,
    settings: CompactionSettings,
    *,
    times: bool = False,
) -> AssembledContext:
    """The context to send the model, within ``token_budget`` unless the tail overflows.

    With ``times``, the result's ``message_spans`` tells the times each message covers.
    """
    if token_budget < 1:
        raise ValueError("token_budget must be positive")
    if settings.prune_heartbeat_ok:
        entries = without_heartbeat_turns(entries)
    prefix, tail = split_fresh_tail(entries, settings)
    if settings.stub_large_tool_payloads:
        limit = settings.stub_tool_payload_tokens
        prefix = tuple(stub_tool_payloads(e, limit) for e in prefix)
    rendered_tail = [render_entry(entry, settings.timezone) for entry in tail]
    tail_tokens = sum(r.tokens for r in rendered_tail)

    chosen: list[tuple[ContextEntry, RenderedEntry]] = []  # newest first, then flipped
    if tail_tokens <= token_budget:
        room = token_budget - tail_tokens
        for entry in reversed(prefix):
            rendered = render_entry(entry, settings.timezone)
            if rendered.tokens > room:
                break
            room -= rendered.tokens
            chosen.append((entry, rendered))
    chosen.reverse()

    while True:
        included = [r for _, r in chosen] + rendered_tail
        turns, added = normalized_turns(_turns(included), times=times)
        total = sum(r.tokens for _, r in chosen) + tail_tokens + added
        if total <= token_budget or not chosen:
            break
        # Dropping an entry may also drop the repair it needed (an opening
        # placeholder, say), so only the excess beyond all repair tokens is sure
        # to need dropping: drop that much (at least one entry), then rebuild.
        need, drop = total - token_budget - added, 1
        need -= chosen[0][1].tokens
        while need > 0 and drop < len(chosen):
            need -= chosen[drop][1].tokens
            drop += 1
        chosen = chosen[drop:]

    return AssembledContext(
        messages=provider_messages(turns),
        estimated_tokens=total,
        summary_count=sum(1 for entry, _ in chosen if entry.is_summary),
        fresh_tail_count=len(tail),
        fresh_tail_overflow=total > token_budget,
        evicted_count=len(prefix) - len(chosen),
        turns=turns if times else None,
    )


def _turns(rendered: list[RenderedEntry]) -> list[Turn]:
    return [r.turn for r in rendered if r.turn is not None]

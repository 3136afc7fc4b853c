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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lcm.assembly.hygiene import stub_tool_payloads, without_heartbeat_turns
from lcm.assembly.normalize import normalized_turns, provider_messages
from lcm.assembly.recall import RECALL_OPENING, RecalledSnippet, render_recalled
from lcm.assembly.render import RenderedEntry, TimeSpan, Turn, render_entry, text_block
from lcm.assembly.selection import choose_by_relevance, drop_last_taken
from lcm.context import ContextEntry
from lcm.policy.fresh_tail import split_fresh_tail
from lcm.settings import CompactionSettings
from lcm.tokens import estimate_tokens


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
    # Snippets of older messages the prompt named, shown in ``messages[recalled_index]``.
    recalled: tuple[RecalledSnippet, ...] = ()
    recalled_index: int | None = None

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
    relevance: Mapping[int, float] | None = None,
    recalled: Sequence[RecalledSnippet] = (),
) -> AssembledContext:
    """The context to send the model, within ``token_budget`` unless the tail overflows.

    With ``times``, the result's ``message_spans`` tells the times each message covers.
    ``relevance`` (ordinal to score, prompt-aware eviction) picks what the
    prefix keeps when not all of it fits (:mod:`lcm.assembly.selection`);
    ``recalled`` snippets are shown before the fresh tail, as many as fit
    what is left of the budget (:mod:`lcm.assembly.recall`).
    """
    if token_budget < 1:
        raise ValueError("token_budget must be positive")
    if settings.prune_heartbeat_ok:
        entries = without_heartbeat_turns(entries)
    prefix, tail = split_fresh_tail(entries, settings)
    if settings.stub_large_tool_payloads:
        limit = settings.stub_tool_payload_tokens
        prefix = tuple(stub_tool_payloads(e, limit) for e in prefix)
    rendered_tail = [render_entry(entry) for entry in tail]
    tail_tokens = sum(r.tokens for r in rendered_tail)

    chosen: list[tuple[ContextEntry, RenderedEntry]] = []  # oldest first
    priority: dict[int, int] | None = None  # prompt-aware: the order units were taken in
    if tail_tokens <= token_budget and relevance:
        chosen, priority = choose_by_relevance(prefix, token_budget - tail_tokens, relevance)
    elif tail_tokens <= token_budget:
        chosen = _newest_first(prefix, token_budget - tail_tokens)

    chosen, turns, total = _fit(chosen, rendered_tail, token_budget, times, priority)
    shown: tuple[RecalledSnippet, ...] = ()
    if recalled and total <= token_budget:
        kept = [r for _, r in chosen]
        room = token_budget - sum(r.tokens for r in kept) - tail_tokens  # before repairs
        found = _with_recalled(_turns(kept), _turns(rendered_tail), recalled, room, times)
        if found is not None:
            shown, turns, extra = found
            total = token_budget - room + extra
    messages = provider_messages(turns)
    return AssembledContext(
        messages=messages,
        estimated_tokens=total,
        summary_count=sum(1 for entry, _ in chosen if entry.is_summary),
        fresh_tail_count=len(tail),
        fresh_tail_overflow=total > token_budget,
        evicted_count=len(prefix) - len(chosen),
        turns=turns if times else None,
        recalled=shown,
        recalled_index=_recalled_index(messages) if shown else None,
    )


def _fit(
    chosen: list[tuple[ContextEntry, RenderedEntry]],
    rendered_tail: list[RenderedEntry],
    token_budget: int,
    times: bool,
    priority: Mapping[int, int] | None,
) -> tuple[list[tuple[ContextEntry, RenderedEntry]], list[Turn], int]:
    """Normalized, dropping prefix entries while the repairs push it over the budget.

    The oldest go first, or with ``priority`` the unit taken last.
    """
    tail_tokens = sum(r.tokens for r in rendered_tail)
    while True:
        included = [r for _, r in chosen] + rendered_tail
        turns, added = normalized_turns(_turns(included), times=times)
        total = sum(r.tokens for _, r in chosen) + tail_tokens + added
        if total <= token_budget or not chosen:
            return chosen, turns, total
        if priority is not None:
            chosen = drop_last_taken(chosen, priority)
            continue
        # Dropping an entry may also drop the repair it needed (an opening
        # placeholder, say), so only the excess beyond all repair tokens is sure
        # to need dropping: drop that much (at least one entry), then rebuild.
        need, drop = total - token_budget - added, 1
        need -= chosen[0][1].tokens
        while need > 0 and drop < len(chosen):
            need -= chosen[drop][1].tokens
            drop += 1
        chosen = chosen[drop:]


def _newest_first(
    prefix: Sequence[ContextEntry], room: int
) -> list[tuple[ContextEntry, RenderedEntry]]:
    """The newest entries of ``prefix`` that fit ``room``, up to the first that does not."""
    chosen = []
    for entry in reversed(prefix):
        rendered = render_entry(entry)
        if rendered.tokens > room:
            break
        room -= rendered.tokens
        chosen.append((entry, rendered))
    chosen.reverse()
    return chosen


def _turns(rendered: list[RenderedEntry]) -> list[Turn]:
    return [r.turn for r in rendered if r.turn is not None]


def _with_recalled(
    prefix: list[Turn],
    tail: list[Turn],
    recalled: Sequence[RecalledSnippet],
    budget_left: int,
    times: bool,
) -> tuple[tuple[RecalledSnippet, ...], list[Turn], int] | None:
    """The most of ``recalled`` (in order) whose block and repairs fit ``budget_left`` tokens.

    Shown just before the fresh tail; never at the cost of anything already
    chosen: fewer snippets, or None. Returns the snippets shown, the turns and
    the tokens the normalizer added.
    """
    # Placed in time where it is shown, as the opening placeholder is.
    neighbour = tail[0] if tail else prefix[-1] if prefix else None
    span = neighbour.span if neighbour is not None else None
    for count in range(len(recalled), 0, -1):
        shown = tuple(recalled[:count])
        text = render_recalled(shown)
        cue = Turn("user", [text_block(text)], span)
        turns, added = normalized_turns([*prefix, cue, *tail], times=times)
        if estimate_tokens(text) + added <= budget_left:
            return shown, turns, estimate_tokens(text) + added
    return None


def _recalled_index(messages: list[dict[str, Any]]) -> int | None:
    for index, message in enumerate(messages):
        content = message["content"]
        if isinstance(content, list) and any(
            b.get("type") == "text" and str(b.get("text", "")).startswith(RECALL_OPENING)
            for b in content
        ):
            return index
    return None

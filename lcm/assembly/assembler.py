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

With a prompt (``lcm.retrieval.prompt_cue``): ``relevance`` makes the prefix
keep what the prompt asks about before the newest entries
(:mod:`lcm.assembly.selection`, ``prompt_aware_eviction``), and ``recalled``
snippets are shown just before the fresh tail, the prefix making room for
them (:mod:`lcm.assembly.recall`).

When the fresh tail alone (with its repairs) exceeds the budget, it is still
returned whole, with no prefix, and ``fresh_tail_overflow`` says so: the
caller decides whether to compact harder or truncate, never this function.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_core import to_json

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
    # ``messages`` as JSON, once encoded (an assembled context may be served many times).
    _encoded: list[bytes] = field(default_factory=list, repr=False, compare=False)

    def messages_json(self) -> bytes:
        """``messages`` as JSON bytes, as pydantic encodes them, encoded once.

        A memoized context (``lcm.window_cache``) is served again while its
        conversation is unchanged: its half megabyte of JSON need not be
        encoded again. ``messages`` must not change after it is built.
        """
        if not self._encoded:
            # Two threads may both encode it: both get the same bytes.
            self._encoded.append(to_json(self.messages))
        return self._encoded[0]

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
    the budget beside it; the prefix makes room (:mod:`lcm.assembly.recall`).
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
    # Recalled snippets are kept like the tail (the prefix makes room for them).
    shown, shown_tail = _with_recalled(recalled, rendered_tail, token_budget)
    tail_tokens = sum(r.tokens for r in shown_tail)

    chosen: list[tuple[ContextEntry, RenderedEntry]] = []  # oldest first
    priority: dict[int, int] | None = None  # prompt-aware: the order units were taken in
    if tail_tokens <= token_budget and relevance:
        chosen, priority = choose_by_relevance(
            prefix, token_budget - tail_tokens, relevance, settings.timezone
        )
    elif tail_tokens <= token_budget:
        chosen = _newest_first(prefix, token_budget - tail_tokens, settings.timezone)
    chosen, turns, total = _fit(chosen, shown_tail, token_budget, times, priority)
    if shown and total > token_budget:  # the repairs left no room for them after all
        return assemble_context(entries, token_budget, settings, times=times, relevance=relevance)
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
    prefix: Sequence[ContextEntry], room: int, timezone: str
) -> list[tuple[ContextEntry, RenderedEntry]]:
    """The newest entries of ``prefix`` that fit ``room``, up to the first that does not."""
    chosen = []
    for entry in reversed(prefix):
        rendered = render_entry(entry, timezone)
        if rendered.tokens > room:
            break
        room -= rendered.tokens
        chosen.append((entry, rendered))
    chosen.reverse()
    return chosen


def _turns(rendered: list[RenderedEntry]) -> list[Turn]:
    return [r.turn for r in rendered if r.turn is not None]


def _with_recalled(
    recalled: Sequence[RecalledSnippet], tail: list[RenderedEntry], token_budget: int
) -> tuple[tuple[RecalledSnippet, ...], list[RenderedEntry]]:
    """The most of ``recalled`` (in order) that fits beside the tail, put just before it.

    Never at the cost of the tail: fewer snippets, or none. The block takes
    the times of the tail's first turn, as the opening placeholder does.
    """
    opening = next((r.turn for r in tail if r.turn is not None), None)
    if not recalled or opening is None:
        return (), tail
    room = token_budget - sum(r.tokens for r in tail)
    for count in range(len(recalled), 0, -1):
        text = render_recalled(recalled[:count])
        tokens = estimate_tokens(text)
        if tokens <= room:
            block = RenderedEntry(Turn("user", [text_block(text)], opening.span), tokens)
            return tuple(recalled[:count]), [block, *tail]
    return (), tail


def _recalled_index(messages: list[dict[str, Any]]) -> int | None:
    # The block is user text; a user's own text cannot spell its opening tag
    # (render.WRAPPER_TAGS), and an assistant's is never looked at.
    for index, message in enumerate(messages):
        content = message["content"]
        if (
            message.get("role") == "user"
            and isinstance(content, list)
            and any(
                b.get("type") == "text" and str(b.get("text", "")).startswith(RECALL_OPENING)
                for b in content
            )
        ):
            return index
    return None

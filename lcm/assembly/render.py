"""Rendering context entries as Anthropic Messages content.

Two jobs: :func:`message_to_provider` rebuilds a stored message exactly as the
gateway sent it, and :func:`render_entry` turns one context entry into a
``user``/``assistant`` turn the Messages API accepts, with the tokens it costs.

Rules chosen where docs/design.md §3 is silent:

* A summary becomes a ``user`` turn holding one text block,
  ``<summary id kind depth descendant_count earliest_at latest_at>`` with
  XML-escaped attributes and ISO-8601 times in the ``timezone`` setting; a
  condensed summary first lists its parents as
  ``<parents><summary_ref id="…"/>…</parents>``.
* A ``system`` message stays where it happened, as a ``user`` turn wrapped in
  ``<system_message>``. The gateway owns the real system prompt; lifting old
  mid-conversation notices into it would lose their place in time.
* A ``tool`` message becomes a ``user`` turn: parts carrying a tool call id
  become ``tool_result`` blocks, anything else ``<tool_output>`` text.
* Text that lands in a ``user`` turn (summary content, wrapped system and tool
  text, user messages' text) has the wrapper tags above made inert
  (:func:`lcm.policy.markup.escape_markup`: ``<`` before one of those tag
  names becomes ``&lt;``), so it cannot close a wrapper or forge a summary;
  all other text, code included, is sent as written. Assistant text and
  provider blocks (``tool_result`` content) are sent as stored.
* A block type the role may not carry (an image in an assistant turn, a
  non-API ``file`` block) is replaced by its stored plain-text extraction;
  blank text blocks are dropped, since the API refuses them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, NamedTuple
from xml.sax.saxutils import escape

from lcm.context import ContextEntry, MessageView, PartView, SummaryView
from lcm.policy.markup import escape_markup
from lcm.policy.timestamps import format_timestamp
from lcm.timezones import DEFAULT_TIMEZONE
from lcm.tokens import estimate_tokens

TurnRole = Literal["user", "assistant"]

ASSISTANT_BLOCK_TYPES = frozenset(
    [
        "text",
        "tool_use",
        "thinking",
        "redacted_thinking",
        "server_tool_use",
        "web_search_tool_result",
    ]
)
USER_BLOCK_TYPES = frozenset({"text", "image", "document", "tool_result", "search_result"})
# Every tag rendering wraps text in: text inside a user turn may not spell them.
WRAPPER_TAGS = (
    "summary",
    "summary_ref",
    "parents",
    "system_message",
    "tool_output",
    "recalled_history",
    "recalled",
)


# The times a turn covers: (earliest, latest) of its sources, messages or
# summaries. A plain tuple: one is built per summary on every assembly, and a
# named tuple takes ~0.5 µs to build, twenty times as long.
TimeSpan = tuple[datetime, datetime]


@dataclass(slots=True)
class Turn:
    """A message being assembled: a role, its content blocks (mutable) and its times.

    ``span`` is set on every turn :func:`render_entry` builds; normalization
    keeps it up to date only when asked for times (``normalized_turns``).
    Kept beside the blocks: the messages carry nothing the API would refuse.
    """

    role: TurnRole
    blocks: list[dict[str, Any]]
    span: TimeSpan | None = None


@dataclass(frozen=True, slots=True)
class RenderedEntry:
    """One entry as a turn (None when nothing sendable is left) and its cost."""

    turn: Turn | None
    tokens: int


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _attr(value: object) -> str:
    return '"' + escape(str(value), {'"': "&quot;"}) + '"'


def inert(text: str) -> str:
    """``text`` unable to open or close a wrapper tag (``escape_markup`` of WRAPPER_TAGS)."""
    return escape_markup(text, WRAPPER_TAGS)


def render_summary(summary: SummaryView, timezone: str = DEFAULT_TIMEZONE) -> str:
    """The ``<summary …>`` text a summary is shown to the model as, times in ``timezone``."""
    attributes = " ".join(
        f"{name}={_attr(value)}"
        for name, value in (
            ("id", summary.id),
            ("kind", summary.kind),
            ("depth", summary.depth),
            ("descendant_count", summary.descendant_count),
            ("earliest_at", format_timestamp(summary.earliest_at, timezone)),
            ("latest_at", format_timestamp(summary.latest_at, timezone)),
        )
    )
    lines = [f"<summary {attributes}>"]
    if summary.kind == "condensed":
        refs = "".join(f"<summary_ref id={_attr(parent)}/>" for parent in summary.parent_ids)
        lines.append(f"<parents>{refs}</parents>")
    lines += [inert(summary.content), "</summary>"]
    return "\n".join(lines)


def summary_context_tokens(summary: SummaryView) -> int:
    """What a summary costs in the assembled context (its rendered XML).

    The database layer should store this as the summary's
    ``context_items.token_count`` so planning and assembly count alike.
    """
    return estimate_tokens(render_summary(summary))


def message_to_provider(message: MessageView) -> dict[str, Any]:
    """The message exactly as the gateway sent it: stored role, string or blocks."""
    if message.content_shape == "text":
        return {"role": message.role, "content": message.content}
    return {"role": message.role, "content": [dict(part.payload) for part in message.parts]}


def render_entry(entry: ContextEntry, timezone: str = DEFAULT_TIMEZONE) -> RenderedEntry:
    """One context entry as an API-acceptable turn, and the tokens it costs.

    A summary's times are written in ``timezone``; messages carry none.

    A message's turn is built once per view and kept on it
    (``MessageView.rendering``): assembly renders the same newest messages
    turn after turn. The turn is shared from then on, so it is never changed
    in place (the normalizer copies what it changes).
    """
    summary = entry.summary
    if summary is not None:
        text = render_summary(summary, timezone)
        span = (summary.earliest_at, summary.latest_at)
        return RenderedEntry(Turn("user", [text_block(text)], span), estimate_tokens(text))
    message = entry.message
    assert message is not None  # ContextEntry guarantees one of the two
    rendering: _Rendering | None = message.rendering
    if rendering is None:
        rendering = _render_message(message)
        if rendering.turn is not None:  # still this call's own: not shared yet
            rendering.turn.span = (message.created_at, message.created_at)
        # The view is frozen and its fields decide the turn: a memo, never stale.
        object.__setattr__(message, "rendering", rendering)
    turn, extra, counts_entry = rendering
    return RenderedEntry(turn, extra + entry.token_count if counts_entry else extra)


class _Rendering(NamedTuple):
    """A message's turn, and its cost: ``extra`` plus its entry's tokens if ``counts_entry``."""

    turn: Turn | None
    extra: int
    counts_entry: bool


def _render_message(message: MessageView) -> _Rendering:
    if message.role == "system":
        return _wrapped(message.content, "system_message")
    if message.role == "tool":
        return _tool_turn(message)
    if message.content_shape == "text":  # most messages: one text block, or none if blank
        if not message.content.strip():
            return _Rendering(None, 0, True)
        if message.role == "assistant":
            return _Rendering(Turn("assistant", [text_block(message.content)]), 0, True)
        text = inert(message.content)
        return _Rendering(
            Turn("user", [text_block(text)]), _escaping_cost(message.content, text), True
        )
    blocks = [_block_for(message.role, part) for part in message.parts]
    extra = 0
    if message.role != "assistant":  # what escaping added to the stored texts' cost
        extra = sum(
            _escaping_cost(_raw_text(p), b.get("text"))
            for p, b in zip(message.parts, blocks, strict=True)
        )
    return _Rendering(_turn(message.role, blocks), extra, True)


def _escaping_cost(raw: str, sent: object) -> int:
    """The tokens escaping added (0 unless the text spelled a wrapper tag)."""
    if not isinstance(sent, str) or len(sent) <= len(raw):
        return 0
    return estimate_tokens(sent) - estimate_tokens(raw)


def _raw_text(part: PartView) -> str:
    text = part.payload.get("text") if part.part_type == "text" else part.text
    return text if isinstance(text, str) else ""


def _wrapped(raw: str, tag: str) -> _Rendering:
    if not raw.strip():
        return _Rendering(None, 0, False)
    text = inert(raw)
    opening, closing = f"<{tag}>\n", f"\n</{tag}>"
    overhead = estimate_tokens(opening + closing) + _escaping_cost(raw, text)
    return _Rendering(Turn("user", [text_block(opening + text + closing)]), overhead, True)


def _tool_turn(message: MessageView) -> _Rendering:
    """A ``tool`` role message: results when parts carry call ids, else tagged text."""
    if not any(p.part_type == "tool_result" or p.tool_call_id for p in message.parts):
        return _wrapped(message.content, "tool_output")
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if part.part_type == "tool_result":
            blocks.append(dict(part.payload))
        elif part.tool_call_id and part.part_type != "tool_use":
            content = part.text or str(part.payload.get("text", ""))
            blocks.append(
                {"type": "tool_result", "tool_use_id": part.tool_call_id, "content": content}
            )
        else:
            blocks.append(_block_for("user", part))
    return _Rendering(_turn("user", blocks), 0, True)


def _block_for(role: str, part: PartView) -> dict[str, Any]:
    if role == "assistant":
        if part.part_type in ASSISTANT_BLOCK_TYPES:
            return dict(part.payload)
        return text_block(part.text)
    if part.part_type == "text" and isinstance(part.payload.get("text"), str):
        return {**part.payload, "text": inert(part.payload["text"])}
    if part.part_type in USER_BLOCK_TYPES:
        return dict(part.payload)
    return text_block(inert(part.text))


def _turn(role: str, blocks: list[dict[str, Any]]) -> Turn | None:
    kept = [b for b in blocks if not is_blank_text(b)]
    if not kept:
        return None
    return Turn("assistant" if role == "assistant" else "user", kept)


def is_blank_text(block: dict[str, Any]) -> bool:
    """A text block the API would refuse for having no visible text."""
    if block.get("type") != "text":
        return False
    text = block.get("text")
    return not isinstance(text, str) or not text.strip()

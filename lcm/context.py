"""Plain data the compaction planner and the assembler work on.

The database layer builds these from ``context_items`` joined with
``messages``/``message_parts`` or ``summaries``/``summary_parents``; nothing in
here knows about rows or sessions. Everything is frozen so a plan computed from
a list of entries cannot be changed behind the planner's back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, get_args

Role = Literal["user", "assistant", "system", "tool"]
ContentShape = Literal["text", "blocks"]
SummaryKind = Literal["leaf", "condensed"]

_ROLES = frozenset(get_args(Role))


@dataclass(frozen=True, slots=True)
class PartView:
    """One stored block of a message (a ``message_parts`` row).

    ``payload`` is the block exactly as the gateway sent it; ``text`` is its
    plain-text extraction, used when a block cannot be sent to the provider as
    is. ``tool_call_id`` is the tool_use id a part declares or answers.
    """

    part_type: str
    payload: Mapping[str, Any]
    tool_call_id: str | None = None
    text: str = ""


@dataclass(frozen=True, slots=True)
class MessageView:
    """A raw message as the planner and the assembler see it.

    What planning and assembly ask of a message on every pass and every turn
    is derived once, when the view is built (views are kept between requests,
    see :mod:`lcm.message_cache`): the tool calls it makes and answers, and
    ``rendering``, the assembler's memo of it as a provider turn
    (:func:`lcm.assembly.render.render_entry` fills it on first use). None
    of them take part in comparisons: they follow from the fields.
    """

    id: int
    seq: int
    role: Role
    content: str
    created_at: datetime
    parts: tuple[PartView, ...] = ()
    content_shape: ContentShape = "text"
    # The provider and model that wrote an assistant message, when the gateway said.
    provider: str | None = None
    model: str | None = None
    tool_use_ids: tuple[str, ...] = field(init=False, compare=False, repr=False)
    """Ids of the tool calls this message makes, in order."""
    tool_result_ids: tuple[str, ...] = field(init=False, compare=False, repr=False)
    """Ids of the tool calls this message answers, in order.

    A ``tool`` role message answers through any part tagged with a call id
    (OpenAI-style plain-text tool output), not only ``tool_result`` blocks.
    """
    rendering: Any = field(default=None, init=False, compare=False, repr=False)
    # This message without its signed reasoning, for other models' contexts
    # (:mod:`lcm.assembly.replay` fills it on first use, like ``rendering``).
    unsigned: Any = field(default=None, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.role not in _ROLES:
            raise ValueError(f"unknown message role {self.role!r}")
        # Frozen: the derived fields are set once, here, as dataclasses allow.
        object.__setattr__(self, "tool_use_ids", _tool_use_ids(self.parts))
        object.__setattr__(self, "tool_result_ids", _tool_result_ids(self.role, self.parts))

    @property
    def starts_user_turn(self) -> bool:
        """True for a user message a human wrote, as opposed to tool output.

        In the Anthropic format tool results travel in ``user`` messages; those
        continue the assistant's agent loop rather than starting a new turn.
        """
        return self.role == "user" and not self.tool_result_ids


def _tool_use_ids(parts: tuple[PartView, ...]) -> tuple[str, ...]:
    return tuple(
        call_id
        for part in parts
        if part.part_type == "tool_use"
        and (call_id := part.tool_call_id or _str_or_none(part.payload.get("id")))
    )


def _tool_result_ids(role: Role, parts: tuple[PartView, ...]) -> tuple[str, ...]:
    ids: list[str] = []
    for part in parts:
        if part.part_type == "tool_result":
            call_id = part.tool_call_id or _str_or_none(part.payload.get("tool_use_id"))
        elif role == "tool" and part.part_type != "tool_use":
            call_id = part.tool_call_id
        else:
            call_id = None
        if call_id:
            ids.append(call_id)
    return tuple(ids)


@dataclass(frozen=True, slots=True)
class SummaryView:
    """A node of the summary DAG as the planner and the assembler see it."""

    id: str
    kind: SummaryKind
    depth: int
    content: str
    token_count: int
    earliest_at: datetime
    latest_at: datetime
    descendant_count: int
    parent_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ContextEntry:
    """One ``context_items`` row: exactly one of ``message`` or ``summary``.

    ``ordinal`` orders entries (it only grows and may have gaps);
    ``token_count`` is what the entry costs in the assembled context.
    """

    ordinal: int
    token_count: int
    message: MessageView | None = None
    summary: SummaryView | None = None

    def __post_init__(self) -> None:
        if (self.message is None) == (self.summary is None):
            raise ValueError("a context entry refers to exactly one message or one summary")

    @property
    def is_message(self) -> bool:
        return self.message is not None

    @property
    def is_summary(self) -> bool:
        return self.summary is not None

    @property
    def summary_depth(self) -> int | None:
        """The summary's depth, or None for a raw message."""
        return None if self.summary is None else self.summary.depth


def context_tokens(entries: Iterable[ContextEntry]) -> int:
    """Tokens of the whole context if every entry were assembled."""
    return sum(entry.token_count for entry in entries)


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None

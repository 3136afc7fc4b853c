"""All SQL that reads a conversation's context, and the views it is made of.

Compaction plans from it, assembly renders from it (from its window's first
ordinal), and retrieval and the doctor rebuild messages and summaries with
the same views, so a message reads back exactly as it was sent whoever asks.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import Select, bindparam, select
from sqlalchemy.orm import Session

from lcm.context import (
    ContentShape,
    ContextEntry,
    MessageView,
    PartView,
    Role,
    SummaryKind,
    SummaryView,
)
from lcm.db.models import ContextItem, Message, MessagePart, Summary, SummaryParent
from lcm.message_cache import MESSAGE_CACHE, MessageCache


def load_context(
    session: Session, conversation_id: int, from_ordinal: int | None = None
) -> list[ContextEntry]:
    """The conversation's context items in order, with their messages and summaries.

    One query reads the items joined with their messages and summaries;
    a second reads the parts of block messages and a third the parents of
    condensed summaries, each only when there are any. ``from_ordinal``
    limits them to a suffix of the context. Messages whose views the
    session's :class:`MessageCache` holds are not built again, nor their
    parts read.
    """
    params = {"conversation_id": conversation_id, "from_ordinal": from_ordinal or 0}
    rows = session.connection().execute(_LOAD_CONTEXT, params).all()
    cache: MessageCache | None = session.info.get(MESSAGE_CACHE)
    messages = cache.get_many(r[2] for r in rows if r[2] is not None) if cache else {}
    pending = [r for r in rows if r[2] is not None and r[2] not in messages]
    built = _message_views(session, pending, params, whole=not messages)
    if cache is not None and built:
        cache.put_many(conversation_id, built)
    messages.update(built)
    condensed = [r.summary_id for r in rows if r.summary_id is not None and r[9] != "leaf"]
    parents = _parents(session, condensed) if condensed else {}
    return [_entry(r, messages, parents) for r in rows]


def _message_views(
    session: Session, rows: Sequence[Any], window: dict[str, int], *, whole: bool
) -> dict[int, MessageView]:
    """Views of the messages of ``rows`` (rows of ``_LOAD_CONTEXT``).

    The parts of their block messages are read for the whole ``window`` when
    no message of it was cached (one query whatever its length), else by id.
    """
    blocks = [r[2] for r in rows if r[8] == "blocks"]
    parts: dict[int, list[PartView]] = defaultdict(list)
    if blocks and whole:
        found = session.connection().execute(_LOAD_WINDOW_PARTS, window).all()
    else:
        found = [
            row
            for start in range(0, len(blocks), _CHUNK)
            for row in session.connection()
            .execute(_LOAD_PARTS_BY_ID, {"message_ids": blocks[start : start + _CHUNK]})
            .all()
        ]
    for message_id, part_type, payload, tool_call_id, plain in found:
        parts[message_id].append(PartView(part_type, payload, tool_call_id, plain))
    views = {}
    for r in rows:
        message_id, shape, content = r[2], r[8], r[6]
        # Roles and shapes were validated on ingest; the casts only tell mypy.
        views[message_id] = MessageView(
            message_id,
            r[4],
            cast(Role, r[5]),
            content,
            r[7],
            tuple(parts.get(message_id, ())) if shape == "blocks" else _text_part(content),
            cast(ContentShape, shape),
        )
    return views


_LOAD_PARENTS = (
    select(SummaryParent.summary_id, SummaryParent.parent_id)
    .where(SummaryParent.summary_id.in_(bindparam("summary_ids", expanding=True)))
    .order_by(SummaryParent.summary_id, SummaryParent.ordinal)
)


def _parents(session: Session, summary_ids: list[str]) -> dict[str, list[str]]:
    parents: dict[str, list[str]] = defaultdict(list)
    found = session.connection().execute(_LOAD_PARENTS, {"summary_ids": summary_ids})
    for summary_id, parent_id in found.all():
        parents[summary_id].append(parent_id)
    return parents


def load_message_views(
    session: Session, message_ids: Sequence[int] | Select[int | None]
) -> dict[int, MessageView]:
    """Messages with their parts, enough to rebuild each exactly as it was sent.

    ``message_ids`` is a list or a subquery. A plain-string message has one
    text part equal to its content (ingest guarantees it), so only block
    messages read their parts.
    """
    parts = load_parts(session, message_ids, blocks_only=True)
    views: dict[int, MessageView] = {}
    for mid, seq, role, content, created_at, shape in session.execute(
        select(
            Message.id,
            Message.seq,
            Message.role,
            Message.content,
            Message.created_at,
            Message.content_shape,
        ).where(Message.id.in_(message_ids))
    ):
        # Roles and shapes were validated on ingest; the casts only tell mypy.
        views[mid] = MessageView(
            mid,
            seq,
            cast(Role, role),
            content,
            created_at,
            tuple(parts[mid]) if shape == "blocks" else _text_part(content),
            cast(ContentShape, shape),
        )
    return views


# Built once with bound parameters: every pass and every assembly runs it, and
# building a statement per call costs several times the CPU of executing it.
_LOAD_CONTEXT = (
    select(
        ContextItem.ordinal,
        ContextItem.token_count,
        ContextItem.message_id,
        ContextItem.summary_id,
        Message.seq,
        Message.role,
        Message.content,
        Message.created_at,
        Message.content_shape,
        Summary.kind,
        Summary.depth,
        Summary.content,
        Summary.token_count,
        Summary.earliest_at,
        Summary.latest_at,
        Summary.descendant_count,
    )
    .outerjoin(Message, Message.id == ContextItem.message_id)
    .outerjoin(Summary, Summary.id == ContextItem.summary_id)
    .where(
        ContextItem.conversation_id == bindparam("conversation_id"),
        ContextItem.ordinal >= bindparam("from_ordinal"),  # 0: all (ordinals start at 1)
    )
    .order_by(ContextItem.ordinal)
)


# A part as PartView holds it, after its message's id.
_PART_COLUMNS = (
    MessagePart.message_id,
    MessagePart.part_type,
    MessagePart.payload,
    MessagePart.tool_call_id,
    MessagePart.text,
)

# The parts of the block messages from an ordinal on (0: all), as _LOAD_CONTEXT
# reads their items. By subquery, not by a list of ids: a long raw history of
# tool calls would exceed the bound-parameter limits.
_LOAD_WINDOW_PARTS = (
    select(*_PART_COLUMNS)
    .join(Message, Message.id == MessagePart.message_id)
    .where(
        MessagePart.message_id.in_(
            select(ContextItem.message_id).where(
                ContextItem.conversation_id == bindparam("conversation_id"),
                ContextItem.ordinal >= bindparam("from_ordinal"),
                ContextItem.message_id.is_not(None),
            )
        ),
        Message.content_shape == "blocks",
    )
    .order_by(MessagePart.message_id, MessagePart.ordinal)
)


_LOAD_PARTS_BY_ID = (
    select(*_PART_COLUMNS)
    .where(MessagePart.message_id.in_(bindparam("message_ids", expanding=True)))
    .order_by(MessagePart.message_id, MessagePart.ordinal)
)
_CHUNK = 500  # ids per IN (...) list


def load_parts(
    session: Session, message_ids: Sequence[int] | Select[int | None], *, blocks_only: bool = False
) -> dict[int, list[PartView]]:
    """The parts of ``message_ids`` in order (``blocks_only``: of block messages among them)."""
    stmt = (
        select(*_PART_COLUMNS)
        .where(MessagePart.message_id.in_(message_ids))
        .order_by(MessagePart.message_id, MessagePart.ordinal)
    )
    if blocks_only:
        stmt = stmt.join(Message, Message.id == MessagePart.message_id).where(
            Message.content_shape == "blocks"
        )
    parts: dict[int, list[PartView]] = defaultdict(list)
    for message_id, part_type, payload, tool_call_id, plain in session.execute(stmt):
        parts[message_id].append(PartView(part_type, payload, tool_call_id, plain))
    return parts


def _entry(
    r: Sequence[Any], messages: dict[int, MessageView], parents: dict[str, list[str]]
) -> ContextEntry:
    """One row of ``_LOAD_CONTEXT`` as a context entry."""
    ordinal, tokens, message_id, summary_id = r[0], r[1], r[2], r[3]
    if message_id is not None:
        return ContextEntry(ordinal, tokens, message=messages[message_id])
    summary = SummaryView(
        id=str(summary_id),
        kind=cast(SummaryKind, r[9]),
        depth=r[10],
        content=r[11],
        token_count=r[12],
        earliest_at=r[13],
        latest_at=r[14],
        descendant_count=r[15],
        parent_ids=tuple(parents.get(str(summary_id), ())),
    )
    return ContextEntry(ordinal, tokens, summary=summary)


def _text_part(content: str) -> tuple[PartView, ...]:
    return (PartView("text", {"type": "text", "text": content}, None, content),)


def summary_view(summary: Summary, parent_ids: Sequence[str]) -> SummaryView:
    return SummaryView(
        id=summary.id,
        kind=summary.kind,  # type: ignore[arg-type]
        depth=summary.depth,
        content=summary.content,
        token_count=summary.token_count,
        earliest_at=summary.earliest_at,
        latest_at=summary.latest_at,
        descendant_count=summary.descendant_count,
        parent_ids=tuple(parent_ids),
    )

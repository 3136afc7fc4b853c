"""All SQL that reads a conversation's context, and the views it is made of.

Compaction plans from it, assembly renders from it (from its window's first
ordinal), and retrieval and the doctor rebuild messages and summaries with
the same views, so a message reads back exactly as it was sent whoever asks.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any, cast

from sqlalchemy import (
    ARRAY,
    BigInteger,
    ColumnElement,
    Executable,
    Select,
    String,
    any_,
    bindparam,
    select,
)
from sqlalchemy.orm import InstrumentedAttribute, Session
from sqlalchemy.types import TypeEngine

from lcm.context import (
    ContentShape,
    ContextEntry,
    MessageView,
    PartView,
    Role,
    SummaryKind,
    SummaryView,
)
from lcm.db.driver import DriverStatement, among_json
from lcm.db.models import ContextItem, Message, MessagePart, Summary, SummaryParent
from lcm.errors import NotFound
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
    parts read; summaries whose parents it holds do not read them.
    """
    params = {"conversation_id": conversation_id, "from_ordinal": from_ordinal or 0}
    rows: Sequence[Any] = _LOAD_CONTEXT.run(session, params).all()
    cache: MessageCache | None = session.info.get(MESSAGE_CACHE)
    cached = cache.get_many(r[2] for r in rows if r[2] is not None) if cache else {}
    # An erased secret (lcm.secret_access) rewrites a message's text in place,
    # maybe in another process: a cached view whose content is no longer the
    # row's (read in the same statement) is built again.
    messages = {r[2]: cached[r[2]] for r in rows if r[2] in cached and cached[r[2]].content == r[7]}
    pending = [r[_MESSAGE_AT] for r in rows if r[2] is not None and r[2] not in messages]
    built = _message_views(session, pending)
    if cache is not None and built:
        cache.put_many(conversation_id, built)
    messages.update(built)
    kinds = [(r[3], r[_SUMMARY_AT.start]) for r in rows if r[3] is not None]
    parents = _parents(session, cache, conversation_id, kinds)
    return [_entry(r[:4], r[_SUMMARY_AT], messages, parents) for r in rows]


def window_entries(
    session: Session, conversation_id: int, items: Sequence[Sequence[Any]]
) -> list[ContextEntry]:
    """Entries for assembly's window rows, without reading the items again.

    ``items`` are rows of ``(ordinal, token_count, message_id, summary_id,
    kind, depth, content, summary token_count, earliest_at, latest_at,
    descendant_count)``, oldest first (``lcm.assembly.repository``): a summary
    comes with its columns, a message from the session's :class:`MessageCache`
    or, when not held there, read by id. Raises ``NotFound`` if a message is
    gone: its conversation was erased after the items were read.
    """
    cache: MessageCache | None = session.info.get(MESSAGE_CACHE)
    messages = cache.get_many(r[2] for r in items if r[2] is not None) if cache else {}
    missing = [r[2] for r in items if r[2] is not None and r[2] not in messages]
    if missing:
        rows = _by_ids(session, _LOAD_MESSAGES_BY_ID, missing)
        if len(rows) < len(set(missing)):
            raise NotFound(f"conversation {conversation_id} was erased while it was read")
        built = _message_views(session, rows)
        if cache is not None:
            cache.put_many(conversation_id, built)
        messages.update(built)
    kinds = [(r[3], r[4]) for r in items if r[3] is not None]
    parents = _parents(session, cache, conversation_id, kinds)
    return [_entry(r[:4], tuple(r[4:]), messages, parents) for r in items]


def _by_ids(session: Session, statement: DriverStatement, ids: Sequence[Any]) -> list[Any]:
    """``statement`` (built by :func:`_among_ids`) run for ``ids``.

    One array on Postgres whatever the count; elsewhere one JSON array
    (``among_json``), so that it too runs on the driver.
    """
    if not ids:
        return []
    if session.get_bind().dialect.name == "postgresql":
        return list(statement.run(session, {_IDS: list(ids)}))
    return list(statement.run(session, {_IDS: json.dumps(list(ids))}))


def _message_views(session: Session, rows: Sequence[Any]) -> dict[int, MessageView]:
    """Views of the messages of ``rows`` (``id, seq, role, content, created_at, shape,
    provider, model``).

    The parts of their block messages are read by message id, never through
    the context's items: at READ COMMITTED each statement sees its own
    snapshot, and a compaction pass committing in between takes messages out
    of the context (their parts would come back empty, and be cached so),
    whereas a message's parts never change while it exists.
    """
    blocks = [r[0] for r in rows if r[5] == "blocks"]
    parts: dict[int, list[PartView]] = defaultdict(list)
    for message_id, part_type, payload, tool_call_id, plain in _by_ids(
        session, _LOAD_PARTS_BY_ID, blocks
    ):
        parts[message_id].append(PartView(part_type, payload, tool_call_id, plain))
    views = {}
    for message_id, seq, role, content, created_at, shape, provider, model in rows:
        # Roles and shapes were validated on ingest; the casts only tell mypy.
        views[message_id] = MessageView(
            message_id,
            seq,
            cast(Role, role),
            content,
            created_at,
            tuple(parts.get(message_id, ())) if shape == "blocks" else _text_part(content),
            cast(ContentShape, shape),
            provider,
            model,
        )
    return views


_IDS = "ids"  # the bound ids of an _among_ids statement


def _among_ids(
    build: Callable[[ColumnElement[bool]], Executable],
    column: InstrumentedAttribute[Any],
    of: type[TypeEngine[Any]] = BigInteger,
) -> DriverStatement:
    """The statement ``build`` makes of "``column`` among the ids" (run by :func:`_by_ids`).

    ``= ANY(array)`` on Postgres, a JSON array elsewhere: one statement text
    whatever the count, run on the driver.
    """
    return DriverStatement(
        build(column == any_(bindparam(_IDS, type_=ARRAY(of)))),
        elsewhere=build(among_json(column, _IDS)),
    )


_LOAD_PARENTS = _among_ids(
    lambda among: (
        select(SummaryParent.summary_id, SummaryParent.parent_id)
        .where(among)
        .order_by(SummaryParent.summary_id, SummaryParent.ordinal)
    ),
    SummaryParent.summary_id,
    String,
)


def _parents(
    session: Session,
    cache: MessageCache | None,
    conversation_id: int,
    kinds: Sequence[tuple[str, str]],
) -> dict[str, tuple[str, ...]]:
    """The parent ids of the condensed summaries among ``kinds`` (summary id, kind).

    From the cache when it holds them (a summary's parents never change),
    else read in one query.
    """
    condensed = [summary_id for summary_id, kind in kinds if kind != "leaf"]
    if not condensed:
        return {}
    parents = cache.parents_of(condensed) if cache is not None else {}
    missing = [summary_id for summary_id in condensed if summary_id not in parents]
    if missing:
        read: dict[str, list[str]] = {summary_id: [] for summary_id in missing}
        for summary_id, parent_id in _by_ids(session, _LOAD_PARENTS, missing):
            read[summary_id].append(parent_id)
        built = {summary_id: tuple(ids) for summary_id, ids in read.items()}
        if cache is not None:
            cache.put_parents(conversation_id, built)
        parents.update(built)
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
_LOAD_CONTEXT = DriverStatement(
    select(
        ContextItem.ordinal,
        ContextItem.token_count,
        ContextItem.message_id,
        ContextItem.summary_id,
        Message.id,
        Message.seq,
        Message.role,
        Message.content,
        Message.created_at,
        Message.content_shape,
        Message.provider,
        Message.model,
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
_MESSAGE_AT = slice(4, 12)  # a _LOAD_CONTEXT row's message columns (as _MESSAGE_COLUMNS)
_SUMMARY_AT = slice(12, 19)  # and its summary's (kind … descendant_count)

_MESSAGE_COLUMNS = (
    Message.id,
    Message.seq,
    Message.role,
    Message.content,
    Message.created_at,
    Message.content_shape,
    Message.provider,
    Message.model,
)
_LOAD_MESSAGES_BY_ID = _among_ids(lambda among: select(*_MESSAGE_COLUMNS).where(among), Message.id)


# A part as PartView holds it, after its message's id.
_PART_COLUMNS = (
    MessagePart.message_id,
    MessagePart.part_type,
    MessagePart.payload,
    MessagePart.tool_call_id,
    MessagePart.text,
)

_LOAD_PARTS_BY_ID = _among_ids(
    lambda among: (
        select(*_PART_COLUMNS).where(among).order_by(MessagePart.message_id, MessagePart.ordinal)
    ),
    MessagePart.message_id,
)


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
    item: Sequence[Any],
    summary: Sequence[Any],
    messages: dict[int, MessageView],
    parents: dict[str, tuple[str, ...]],
) -> ContextEntry:
    """One item (``ordinal, tokens, message_id, summary_id``) as a context entry.

    ``summary`` is the summary's columns (kind, depth, content, token_count,
    earliest_at, latest_at, descendant_count) for a summary item.
    """
    ordinal, tokens, message_id, summary_id = item
    if message_id is not None:
        return ContextEntry(ordinal, tokens, message=messages[message_id])
    kind, depth, content, token_count, earliest_at, latest_at, descendants = summary
    view = SummaryView(
        id=str(summary_id),
        kind=cast(SummaryKind, kind),
        depth=depth,
        content=content,
        token_count=token_count,
        earliest_at=earliest_at,
        latest_at=latest_at,
        descendant_count=descendants,
        parent_ids=parents.get(str(summary_id), ()),
    )
    return ContextEntry(ordinal, tokens, summary=view)


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

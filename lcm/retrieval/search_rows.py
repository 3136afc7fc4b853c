"""What a grep hit is and which rows a search may read: shared by every search statement.

A hit is a message or a summary (:class:`SearchRow`); a search always stays
inside one tenant and its :class:`Bounds`. The statements themselves are
built in :mod:`lcm.retrieval.search_repository`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import ColumnElement, exists, literal_column, select
from sqlalchemy.sql.elements import UnaryExpression
from sqlalchemy.sql.operators import custom_op

from lcm.db.models import ContextItem, Message, Summary
from lcm.retrieval.ranking_sql import Target

Sort = Literal["recency", "relevance", "hybrid"]


@dataclass(frozen=True, slots=True)
class Bounds:
    """Where a search may look: always one tenant; ``None`` = all its conversations."""

    tenant_id: str
    conversation_ids: tuple[int, ...] | None
    since: datetime | None = None
    before: datetime | None = None
    # Only rows the conversations' context items refer to (what assembly may show).
    in_context: bool = False


@dataclass(frozen=True, slots=True)
class SearchRow:
    """One searchable row: a message or a summary, with what a match reports."""

    target: Target
    id: int | str
    conversation_id: int
    seq: int | None
    at: datetime  # what recency means: message time, or a summary's newest source
    created_at: datetime
    content: str
    role: str | None = None
    kind: str | None = None
    depth: int | None = None
    score: float | None = None


def order_key(sort: Sort) -> Any:
    """The key that sorts hits as ``sort`` says (highest first), for merging result lists."""

    def key(row: SearchRow) -> tuple[Any, ...]:
        recency = (row.at, int(row.id))
        return recency if sort == "recency" else (row.score or 0.0, *recency)

    return key


def recency_column(target: Target) -> Any:
    """What recency means for ``target``: a message's time, a summary's newest source."""
    return Message.created_at if target == "message" else Summary.latest_at


def content_column(target: Target) -> Any:
    """The searched text of ``target``."""
    return Message.content if target == "message" else Summary.content


def row_select(target: Target, score: ColumnElement[float] | None) -> Any:
    """The columns a hit of ``target`` reports (``score`` as NULL when not ranked)."""
    score_column = (score if score is not None else literal_column("NULL")).label("score")
    if target == "message":
        return select(
            Message.id,
            Message.conversation_id,
            Message.seq,
            Message.created_at,
            Message.content,
            Message.role,
            score_column,
        )
    return select(
        Summary.id,
        Summary.conversation_id,
        Summary.latest_at,
        Summary.created_at,
        Summary.content,
        Summary.kind,
        Summary.depth,
        score_column,
    )


def to_row(target: Target, m: Any) -> SearchRow:
    """A result row of :func:`row_select` as a :class:`SearchRow`."""
    score = None if m["score"] is None else float(m["score"])
    if target == "message":
        return SearchRow(
            "message",
            m["id"],
            m["conversation_id"],
            m["seq"],
            m["created_at"],
            m["created_at"],
            m["content"],
            role=m["role"],
            score=score,
        )
    return SearchRow(
        "summary",
        m["id"],
        m["conversation_id"],
        None,
        m["latest_at"],
        m["created_at"],
        m["content"],
        kind=m["kind"],
        depth=m["depth"],
        score=score,
    )


def within_bounds(
    target: Target, bounds: Bounds, *, indexed: bool = True
) -> list[ColumnElement[bool]]:
    """The rows ``bounds`` allows; ``indexed=False`` keeps the planner off their indexes.

    SQLite has no table statistics here and takes ``tenant_id = ?`` for a
    handful of rows, so a query meant to fetch a few rows by id (the search
    backlog's) would walk all the tenant's messages instead. A unary ``+``
    (a no-op in SQLite) stops a term from using an index; the rowid stays usable.
    """
    model: Any = Message if target == "message" else Summary

    def col(c: Any) -> Any:
        return c if indexed else UnaryExpression(c, operator=custom_op("+"), type_=c.type)

    start = Message.created_at if target == "message" else Summary.earliest_at
    conditions = [col(model.tenant_id) == bounds.tenant_id]
    if bounds.conversation_ids is not None:
        conditions.append(col(model.conversation_id).in_(bounds.conversation_ids))
    if bounds.since is not None:
        conditions.append(col(recency_column(target)) >= bounds.since)
    if bounds.before is not None:
        conditions.append(col(start) < bounds.before)
    if bounds.in_context:
        # Through the item's own index (by message or by summary id).
        ref = ContextItem.message_id if target == "message" else ContextItem.summary_id
        conditions.append(exists().where(ref == model.id))
    return conditions

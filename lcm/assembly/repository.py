"""All SQL of assembly: the newest context items a budget can reach, and what they hold.

Assembly fills the budget newest-first, so nothing older than the items
that hold the budget can make it into the context. This repository reads
those items in two steps, each a fixed number of queries whatever the
conversation's size:

* :meth:`AssemblyRepository.window` reads the thin rows (ordinal, tokens,
  refs) newest-first, in **ordinal ranges** rather than ``ORDER BY … LIMIT``:
  a range query reads only the rows in its range whatever plan the database
  picks, whereas a LIMIT query is planned from the conversation's estimated
  size and, with stale statistics (a conversation that just grew), sorts the
  whole conversation (5 ms for 20,000 items, every request).
* :meth:`AssemblyRepository.entries` reads what those items refer to:
  messages (and the parts of block messages) and summaries (and their
  parents), skipping the queries a window has nothing for.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, TypeVarTuple, cast

from sqlalchemy import ColumnElement, Result, Select, and_, func, select
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

_Row = TypeVarTuple("_Row")

# Ordinals the first range covers: about a 100k-token budget of chat-sized
# messages. Later ranges are sized from what the first held (see window()).
FIRST_SPAN = 1024


ITEM_COLUMNS = (
    ContextItem.ordinal,
    ContextItem.token_count,
    ContextItem.message_id,
    ContextItem.summary_id,
)


class ItemRef(NamedTuple):
    """A ``context_items`` row without what it refers to."""

    ordinal: int
    token_count: int
    message_id: int | None
    summary_id: str | None


@dataclass(frozen=True, slots=True)
class Window:
    """The newest items holding a budget, oldest first; ``whole``: no older item exists."""

    items: list[ItemRef]
    whole: bool


class AssemblyRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def _rows(self, statement: Select[*_Row]) -> Result[*_Row]:
        # Plain column selects, run on the session's connection: through
        # Session.execute the ORM's result machinery costs more than the
        # query itself for a window of a thousand rows.
        return self.session.connection().execute(statement)

    def window(self, conversation_id: int, token_budget: int, min_items: int) -> Window:
        """The newest items, up to and including the one that takes the total past the budget.

        At least ``min_items`` items (when the conversation has them). Reads
        ranges of ordinals from the newest end, the first found by the index
        in the same query (which also asks for the oldest ordinal, where to
        stop). Ordinals have gaps where compaction replaced a
        range by one summary, so each later range is sized to what the tokens
        seen so far predict the rest of the budget needs (at least doubling):
        a sparse, compacted context takes few queries too.
        """
        in_conversation = ContextItem.conversation_id == conversation_id
        newest = select(func.max(ContextItem.ordinal)).where(in_conversation).scalar_subquery()
        oldest = select(func.min(ContextItem.ordinal)).where(in_conversation).scalar_subquery()
        first = self._rows(
            select(*ITEM_COLUMNS, oldest)
            .where(in_conversation, ContextItem.ordinal > newest - FIRST_SPAN)
            .order_by(ContextItem.ordinal.desc())
        ).all()
        if not first:
            return Window([], whole=True)
        rows = [ItemRef(*row[:4]) for row in first]
        lowest = first[0][4]
        newest_first: list[ItemRef] = []
        highest, span, total = rows[0].ordinal, FIRST_SPAN, 0
        upper = highest + 1 - span  # the next range ends below this ordinal
        while True:
            for item in rows:
                newest_first.append(item)
                total += item.token_count
                if total > token_budget and len(newest_first) >= min_items:
                    newest_first.reverse()
                    return Window(newest_first, whole=False)
            if upper <= lowest:
                break
            wanted = (highest + 1 - upper) * (token_budget - total) // total + 1 if total else 0
            span = max(2 * span, wanted + wanted // 4)
            rows = self._items(
                in_conversation, ContextItem.ordinal >= upper - span, ContextItem.ordinal < upper
            )
            upper -= span
        newest_first.reverse()
        return Window(newest_first, whole=True)

    def _items(self, *where: ColumnElement[bool]) -> list[ItemRef]:
        """Items matching ``where``, newest first."""
        rows = self._rows(
            select(*ITEM_COLUMNS).where(*where).order_by(ContextItem.ordinal.desc())
        ).all()  # all at once: iterating the result fetches row by row
        return [ItemRef._make(row) for row in rows]

    def entries(self, conversation_id: int, items: Sequence[ItemRef]) -> list[ContextEntry]:
        """``items`` (a window: the newest items, oldest first) with what they refer to.

        The queries select by the window's ordinal range (one bound parameter
        however many items) and only run when the window holds their kind.
        """
        if not items:
            return []
        in_window = and_(
            ContextItem.conversation_id == conversation_id,
            ContextItem.ordinal >= items[0].ordinal,
        )
        messages: dict[int, MessageView] = {}
        if any(i.message_id is not None for i in items):
            messages = self._messages(in_window)
        summaries: dict[str, SummaryView] = {}
        if any(i.summary_id is not None for i in items):
            summaries = self._summaries(in_window)
        return [
            ContextEntry(i.ordinal, i.token_count, message=messages[i.message_id])
            if i.message_id is not None
            else ContextEntry(i.ordinal, i.token_count, summary=summaries[str(i.summary_id)])
            for i in items
        ]

    def _messages(self, in_window: ColumnElement[bool]) -> dict[int, MessageView]:
        rows = self._rows(
            select(
                Message.id,
                Message.seq,
                Message.role,
                Message.content,
                Message.created_at,
                Message.content_shape,
            )
            .join(ContextItem, ContextItem.message_id == Message.id)
            .where(in_window)
        ).all()
        # A plain-string message has one text part equal to its content
        # (ingest guarantees it), so only block messages read their parts.
        parts: dict[int, list[PartView]] = defaultdict(list)
        if any(row[5] == "blocks" for row in rows):
            parts = self._parts(in_window)
        return {
            mid: MessageView(
                mid,
                seq,
                cast(Role, role),  # roles and shapes were validated on ingest
                content,
                created_at,
                tuple(parts[mid])
                if shape == "blocks"
                else (PartView("text", {"type": "text", "text": content}, None, content),),
                cast(ContentShape, shape),
            )
            for mid, seq, role, content, created_at, shape in rows
        }

    def _parts(self, in_window: ColumnElement[bool]) -> dict[int, list[PartView]]:
        parts: dict[int, list[PartView]] = defaultdict(list)
        for message_id, part_type, payload, tool_call_id, text in self._rows(
            select(
                MessagePart.message_id,
                MessagePart.part_type,
                MessagePart.payload,
                MessagePart.tool_call_id,
                MessagePart.text,
            )
            .join(ContextItem, ContextItem.message_id == MessagePart.message_id)
            .where(in_window)
            .order_by(MessagePart.message_id, MessagePart.ordinal)
        ):
            parts[message_id].append(PartView(part_type, payload, tool_call_id, text))
        return parts

    def _summaries(self, in_window: ColumnElement[bool]) -> dict[str, SummaryView]:
        parents: dict[str, list[str]] = defaultdict(list)
        for summary_id, parent_id in self._rows(
            select(SummaryParent.summary_id, SummaryParent.parent_id)
            .join(ContextItem, ContextItem.summary_id == SummaryParent.summary_id)
            .where(in_window)
            .order_by(SummaryParent.summary_id, SummaryParent.ordinal)
        ):
            parents[summary_id].append(parent_id)
        return {
            sid: SummaryView(
                id=sid,
                kind=cast(SummaryKind, kind),
                depth=depth,
                content=content,
                token_count=tokens,
                earliest_at=earliest_at,
                latest_at=latest_at,
                descendant_count=descendants,
                parent_ids=tuple(parents[sid]),
            )
            for sid, kind, depth, content, tokens, earliest_at, latest_at, descendants in (
                self._rows(
                    select(
                        Summary.id,
                        Summary.kind,
                        Summary.depth,
                        Summary.content,
                        Summary.token_count,
                        Summary.earliest_at,
                        Summary.latest_at,
                        Summary.descendant_count,
                    )
                    .join(ContextItem, ContextItem.summary_id == Summary.id)
                    .where(in_window)
                )
            )
        }

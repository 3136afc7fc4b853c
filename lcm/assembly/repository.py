"""The SQL of assembly's window: the newest context items a budget can reach.

Assembly fills the budget newest-first, so nothing older than the items
that hold the budget can make it into the context.
:meth:`AssemblyRepository.window` reads the thin rows (ordinal, tokens,
refs) newest-first, in **ordinal ranges** rather than ``ORDER BY … LIMIT``:
a range query reads only the rows in its range whatever plan the database
picks, whereas a LIMIT query is planned from the conversation's estimated
size and, with stale statistics (a conversation that just grew), sorts the
whole conversation (5 ms for 20,000 items, every request). What the window's
items refer to is then read by the context read compaction uses too
(``lcm.context_store.load_context`` from the window's first ordinal).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import bindparam, func, select
from sqlalchemy.orm import Session

from lcm.assembly.growth import reaches_budget
from lcm.db.driver import DriverStatement
from lcm.db.models import ContextItem, Conversation, Message, MessagePart, Summary
from lcm.window_cache import Stamp

# Ordinals the first range covers: the budget over a chat-sized message's
# tokens, between 256 and FIRST_SPAN (a 100k-token budget). Later ranges are
# sized from what the first held (see window()): a guess too small costs one
# more range, one too large only rows read for nothing (a gateway's 24k
# budget needed ~130 items of a 1,024-ordinal first range).
FIRST_SPAN = 1024
_GUESSED_ITEM_TOKENS = 100


def first_span(token_budget: int, min_items: int) -> int:
    return min(FIRST_SPAN, max(256, min_items, token_budget // _GUESSED_ITEM_TOKENS))


# An item and, for a summary item, the summary's columns: a summary in the
# window is read with its item (one query), a message by id or from the
# process's cache of message views (lcm.context_store.repository.window_entries).
ITEM_COLUMNS = (
    ContextItem.ordinal,
    ContextItem.token_count,
    ContextItem.message_id,
    ContextItem.summary_id,
    Summary.kind,
    Summary.depth,
    Summary.content,
    Summary.token_count,
    Summary.earliest_at,
    Summary.latest_at,
    Summary.descendant_count,
)


class ItemRef(NamedTuple):
    """A ``context_items`` row, with its summary's columns when it is a summary item."""

    ordinal: int
    token_count: int
    message_id: int | None
    summary_id: str | None
    kind: str | None = None
    depth: int | None = None
    content: str | None = None
    summary_tokens: int | None = None
    earliest_at: datetime | None = None
    latest_at: datetime | None = None
    descendant_count: int | None = None


@dataclass(frozen=True, slots=True)
class Window:
    """The newest items holding a budget, oldest first; ``whole``: no older item exists."""

    items: list[ItemRef]
    whole: bool


class AssemblyRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

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
        span = first_span(token_budget, min_items)
        first: Sequence[Any] = _FIRST_RANGE.run(
            self.session, {"conversation_id": conversation_id, "span": span}
        ).all()
        if not first:
            return Window([], whole=True)
        rows = [ItemRef._make(row[:_WIDTH]) for row in first]
        lowest: int = first[0][_WIDTH]
        newest_first: list[ItemRef] = []
        highest, total = rows[0].ordinal, 0
        upper = highest + 1 - span  # the next range ends below this ordinal
        while True:
            for item in rows:
                newest_first.append(item)
                total += item.token_count
                if reaches_budget(total, len(newest_first), token_budget, min_items):
                    newest_first.reverse()
                    return Window(newest_first, whole=False)
            if upper <= lowest:
                break
            wanted = (highest + 1 - upper) * (token_budget - total) // total + 1 if total else 0
            span = max(2 * span, wanted + wanted // 4)
            bounds = {"conversation_id": conversation_id, "low": upper - span, "high": upper}
            rows = [ItemRef._make(row) for row in _RANGE.run(self.session, bounds).all()]
            upper -= span
        newest_first.reverse()
        return Window(newest_first, whole=True)

    def stamp(self, conversation_id: int) -> Stamp | None:
        """The context's version, its appends, its newest item's ordinal and ref; None if empty.

        What a window read at this stamp is valid for (``lcm.window_cache``).
        """
        row = _STAMP.run(self.session, {"conversation_id": conversation_id}).first()
        if row is None:
            return None
        version, appends, ordinal, message_id, summary_id = row
        newest = int(message_id) if message_id is not None else str(summary_id)
        return Stamp(int(version), int(appends), int(ordinal), newest)

    def appended(self, conversation_id: int, since: Stamp, until: int) -> list[ItemRef] | None:
        """The items after ``since``'s newest, up to ordinal ``until``, oldest first.

        None unless ``since``'s newest item is still in the context at its
        ordinal (read by the same range query): otherwise the context is not
        ``since``'s grown by appends (``lcm.window_cache``).
        """
        bounds = {"conversation_id": conversation_id, "low": since.ordinal, "high": until + 1}
        rows = [ItemRef._make(row) for row in _RANGE.run(self.session, bounds).all()]
        if not rows or rows[-1].ordinal != since.ordinal or _ref(rows[-1]) != since.newest:
            return None
        rows.pop()
        rows.reverse()
        return rows

    def latest_turn_start(self, conversation_id: int, before: int) -> int | None:
        """Ordinal of the newest turn-starting user message before ``before``, in the raw run.

        A user message starts a turn unless it carries tool results; a summary
        ends the trailing run of raw messages, so only messages after the
        newest summary count. The fresh tail never splits this turn.
        """
        params = {"conversation_id": conversation_id, "before": before}
        ordinal = _LATEST_TURN_START.run(self.session, params).scalar()
        return None if ordinal is None else int(ordinal)


def _ref(item: ItemRef) -> int | str | None:
    return item.message_id if item.message_id is not None else item.summary_id


_WIDTH = len(ITEM_COLUMNS)
_ITEMS_WITH_SUMMARIES = ContextItem.__table__.outerjoin(
    Summary.__table__, Summary.id == ContextItem.summary_id
)
_IN_CONVERSATION = ContextItem.conversation_id == bindparam("conversation_id")
_FIRST_RANGE = DriverStatement(
    select(
        *ITEM_COLUMNS,
        select(func.min(ContextItem.ordinal)).where(_IN_CONVERSATION).scalar_subquery(),
    )
    .select_from(_ITEMS_WITH_SUMMARIES)
    .where(
        _IN_CONVERSATION,
        ContextItem.ordinal
        > select(func.max(ContextItem.ordinal)).where(_IN_CONVERSATION).scalar_subquery()
        - bindparam("span"),
    )
    .order_by(ContextItem.ordinal.desc())
)
# The conversation's context version and appends, the newest item's ordinal and refs.
_STAMP = DriverStatement(
    select(
        Conversation.context_version,
        Conversation.context_appends,
        ContextItem.ordinal,
        ContextItem.message_id,
        ContextItem.summary_id,
    )
    .join(Conversation, Conversation.id == ContextItem.conversation_id)
    .where(
        _IN_CONVERSATION,
        ContextItem.ordinal
        == select(func.max(ContextItem.ordinal)).where(_IN_CONVERSATION).scalar_subquery(),
    )
)
# A later range, [low, high), newest first.
_RANGE = DriverStatement(
    select(*ITEM_COLUMNS)
    .select_from(_ITEMS_WITH_SUMMARIES)
    .where(
        _IN_CONVERSATION,
        ContextItem.ordinal >= bindparam("low"),
        ContextItem.ordinal < bindparam("high"),
    )
    .order_by(ContextItem.ordinal.desc())
)

# Assembly asks when its window holds no turn start: the newest turn-starting
# user message after the newest summary (``latest_turn_start``).
_LATEST_TURN_START = DriverStatement(
    select(ContextItem.ordinal)
    .join(Message, Message.id == ContextItem.message_id)
    .where(
        _IN_CONVERSATION,
        ContextItem.ordinal
        > select(func.coalesce(func.max(ContextItem.ordinal), 0))
        .where(_IN_CONVERSATION, ContextItem.summary_id.is_not(None))
        .scalar_subquery(),
        ContextItem.ordinal < bindparam("before"),
        Message.role == "user",
        ~select(MessagePart.id)
        .where(MessagePart.message_id == Message.id, MessagePart.part_type == "tool_result")
        .exists(),
    )
    .order_by(ContextItem.ordinal.desc())
    .limit(1)
)

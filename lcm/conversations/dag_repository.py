"""The SQL of the DAG view: a context's summaries and the message ranges under them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from lcm.db.models import (
    ContextItem,
    Message,
    Summary,
    SummaryMessage,
)

_CHUNK = 500  # ids per IN (...) list


class SummaryFacts(NamedTuple):
    id: str
    kind: str
    depth: int
    token_count: int
    descendant_count: int
    earliest_at: datetime
    latest_at: datetime


class DagRepository:
    """The reads behind ``lcm dag`` (a conversation's context and DAG), chunked by 500 ids."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def context(self, conversation_id: int) -> list[tuple[str | None, int | None, int]]:
        """(summary id, message seq, tokens) per context item, in order."""
        return [
            (summary_id, seq, int(tokens))
            for summary_id, seq, tokens in self.session.execute(
                select(ContextItem.summary_id, Message.seq, ContextItem.token_count)
                .outerjoin(Message, Message.id == ContextItem.message_id)
                .where(ContextItem.conversation_id == conversation_id)
                .order_by(ContextItem.ordinal)
            )
        ]

    def summaries(self, ids: Sequence[str]) -> list[SummaryFacts]:
        """The summaries' figures, without their text (the DAG view never reads it)."""
        found: list[SummaryFacts] = []
        columns = [getattr(Summary, name) for name in SummaryFacts._fields]
        for start in range(0, len(ids), _CHUNK):
            # Plain rows, not ORM objects: a DAG of thousands of nodes stays cheap.
            found += (
                SummaryFacts(*row)
                for row in self.session.execute(
                    select(*columns).where(Summary.id.in_(ids[start : start + _CHUNK]))
                )
            )
        return found

    def leaf_ranges(self, ids: Sequence[str]) -> dict[str, tuple[int, int, int, int]]:
        """Leaf summary -> (first seq, last seq, messages, tokens) of what it covers."""
        found: dict[str, tuple[int, int, int, int]] = {}
        for start in range(0, len(ids), _CHUNK):
            for summary_id, first, last, count, tokens in self.session.execute(
                select(
                    SummaryMessage.summary_id,
                    func.min(Message.seq),
                    func.max(Message.seq),
                    func.count(),
                    func.sum(Message.token_count),
                )
                .join(Message, Message.id == SummaryMessage.message_id)
                .where(SummaryMessage.summary_id.in_(ids[start : start + _CHUNK]))
                .group_by(SummaryMessage.summary_id)
            ):
                found[summary_id] = (first, last, count, int(tokens or 0))
        return found

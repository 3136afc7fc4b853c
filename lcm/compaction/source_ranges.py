"""All SQL of a summary's stored source range (migration 0030): recompute it, find it wrong.

A summary stores the raw messages below it, through every level (what
describe reports): ``source_message_count``, ``source_first_seq``,
``source_last_seq``. A pass writes them with the summary (``engine.py``);
import and the doctor recompute them here. A summary with parents takes
the union of its parents' stored ranges; one without takes its linked
messages (the describe walk's leaves are exactly the summaries without
parents). So when every summary agrees with its own sources, every stored
range equals the walk, by induction from the leaves: the doctor checks
each summary against its sources (one statement, no walk) and repairs a
conversation by recomputing its summaries bottom-up.

A parent without a count (written by a server older than 0030) leaves its
child's unknown too: describe then walks, and the doctor repairs it.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Select,
    and_,
    case,
    exists,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.orm import Session, aliased

from lcm.db.models import Message, Summary, SummaryMessage, SummaryParent

_parent = aliased(Summary, name="range_parent")


def _has_parents() -> ColumnElement[bool]:
    return exists().where(SummaryParent.summary_id == Summary.id)


def _from_parents(column: ColumnElement[Any]) -> Select[Any]:
    return (
        select(column)
        .select_from(SummaryParent)
        .join(_parent, _parent.id == SummaryParent.parent_id)
        .where(SummaryParent.summary_id == Summary.id)
    )


def _from_messages(column: ColumnElement[Any]) -> Select[Any]:
    return (
        select(column)
        .select_from(SummaryMessage)
        .join(Message, Message.id == SummaryMessage.message_id)
        .where(SummaryMessage.summary_id == Summary.id)
    )


def expected_range() -> dict[str, ColumnElement[Any]]:
    """Each range column's value recomputed from the summary's own sources (correlated)."""
    known = func.count() == func.count(_parent.source_message_count)
    parents_count = case((known, func.coalesce(func.sum(_parent.source_message_count), 0)))
    pairs = {
        "source_message_count": (parents_count, func.count()),
        "source_first_seq": (func.min(_parent.source_first_seq), func.min(Message.seq)),
        "source_last_seq": (func.max(_parent.source_last_seq), func.max(Message.seq)),
    }
    return {
        name: case(
            (_has_parents(), _from_parents(of_parents).scalar_subquery()),
            else_=_from_messages(of_messages).scalar_subquery(),
        )
        for name, (of_parents, of_messages) in pairs.items()
    }


class SourceRangeRepository:
    """On a session, or on a bare connection (a bulk loader's, ``bench/growth_seed.py``)."""

    def __init__(self, session: Session | Connection) -> None:
        self.session = session

    def recompute(self, where: ColumnElement[bool]) -> int:
        """Recompute the range of the summaries ``where`` selects, shallowest first; rows."""
        depths = self.session.scalars(
            select(Summary.depth).where(where).distinct().order_by(Summary.depth)
        ).all()
        values = expected_range()
        changed = 0
        for depth in depths:
            result = self.session.execute(
                update(Summary)
                .where(where, Summary.depth == depth)
                .values(values)
                .execution_options(synchronize_session=False)
            )
            changed += int(result.rowcount or 0)  # type: ignore[attr-defined]
        return changed

    def recompute_ids(self, summary_ids: Collection[str]) -> int:
        return self.recompute(Summary.id.in_(list(summary_ids))) if summary_ids else 0

    def recompute_conversation(self, conversation_id: int) -> int:
        return self.recompute(Summary.conversation_id == conversation_id)

    def mismatched(self, conversations: Select[Any]) -> list[tuple[int, str]]:
        """(conversation id, summary id) of summaries whose stored range is not their sources'."""
        expected = expected_range()
        differs = or_(
            *(getattr(Summary, name).is_distinct_from(value) for name, value in expected.items())
        )
        stmt = (
            select(Summary.conversation_id, Summary.id)
            .where(and_(Summary.conversation_id.in_(conversations), differs))
            .order_by(Summary.conversation_id, Summary.depth, Summary.id)
        )
        return [(int(cid), str(sid)) for cid, sid in self.session.execute(stmt)]

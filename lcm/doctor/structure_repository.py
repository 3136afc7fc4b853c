"""All SQL of the doctor's structural checks: context items, counters, stored token counts
and source ranges."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass

from sqlalchemy import Select, and_, delete, func, or_, select, update
from sqlalchemy.orm import Session, aliased

from lcm.compaction import SourceRangeRepository
from lcm.db.models import ContextItem, Conversation, Message, MessagePart, Summary, SummaryParent

SCAN_BATCH = 2_000


@dataclass(frozen=True, slots=True)
class CounterState:
    conversation_id: int
    last_seq: int
    max_seq: int
    last_ordinal: int
    max_ordinal: int


def _conversations(tenant_id: str, cid: int | None) -> Select[int]:
    """The conversations a check reads: every row is found by its conversation's index."""
    stmt = select(Conversation.id).where(Conversation.tenant_id == tenant_id)
    return stmt if cid is None else stmt.where(Conversation.id == cid)


class StructureRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def dangling_items(self, tenant_id: str, cid: int | None) -> list[tuple[int, int]]:
        """(conversation id, ordinal) of context items pointing at no row of theirs."""
        message = aliased(Message)
        summary = aliased(Summary)
        sound = or_(
            and_(
                ContextItem.item_type == "message",
                ContextItem.summary_id.is_(None),
                message.id.is_not(None),  # false, not NULL, when it is missing
                message.conversation_id == ContextItem.conversation_id,
            ),
            and_(
                ContextItem.item_type == "summary",
                ContextItem.message_id.is_(None),
                summary.id.is_not(None),
                summary.tenant_id == ContextItem.tenant_id,
            ),
        )
        stmt = (
            select(ContextItem.conversation_id, ContextItem.ordinal)
            .outerjoin(message, message.id == ContextItem.message_id)
            .outerjoin(summary, summary.id == ContextItem.summary_id)
            .where(ContextItem.conversation_id.in_(_conversations(tenant_id, cid)), ~sound)
            .order_by(ContextItem.conversation_id, ContextItem.ordinal)
        )
        return [(int(c), int(o)) for c, o in self.session.execute(stmt)]

    def counters(self, tenant_id: str, cid: int | None) -> list[CounterState]:
        """Conversations whose ``last_seq`` or ``last_ordinal`` is behind a stored row.

        The next ingest takes ``last + 1``: behind a stored row it would
        collide with it (a unique key) and fail.
        """
        max_seq = (
            select(func.max(Message.seq))
            .where(Message.conversation_id == Conversation.id)
            .scalar_subquery()
        )
        max_ordinal = (
            select(func.max(ContextItem.ordinal))
            .where(ContextItem.conversation_id == Conversation.id)
            .scalar_subquery()
        )
        stmt = select(
            Conversation.id,
            Conversation.last_seq,
            func.coalesce(max_seq, 0),
            Conversation.last_ordinal,
            func.coalesce(max_ordinal, 0),
        ).where(Conversation.tenant_id == tenant_id)
        if cid is not None:
            stmt = stmt.where(Conversation.id == cid)
        found = [CounterState(*map(int, row)) for row in self.session.execute(stmt)]
        return [c for c in found if c.max_seq > c.last_seq or c.max_ordinal > c.last_ordinal]

    def messages_with_counts(
        self, tenant_id: str, cid: int | None
    ) -> Iterator[tuple[int, int, int, str, int, int]]:
        """(conversation id, message id, seq, content, token count, image parts), streamed."""
        conversations = _conversations(tenant_id, cid)
        images = (
            select(MessagePart.message_id, func.count().label("n"))
            .join(Message, Message.id == MessagePart.message_id)
            .where(Message.conversation_id.in_(conversations), MessagePart.part_type == "image")
            .group_by(MessagePart.message_id)
            .subquery()
        )
        stmt = (
            select(
                Message.conversation_id,
                Message.id,
                Message.seq,
                Message.content,
                Message.token_count,
                func.coalesce(images.c.n, 0),
            )
            .outerjoin(images, images.c.message_id == Message.id)
            .where(Message.conversation_id.in_(conversations))
            .execution_options(yield_per=SCAN_BATCH)
        )
        for row in self.session.execute(stmt):
            yield int(row[0]), int(row[1]), int(row[2]), str(row[3]), int(row[4]), int(row[5])

    def summaries(self, tenant_id: str, cid: int | None) -> list[Summary]:
        """The summaries of the conversations, and those their contexts show (retained ones)."""
        conversations = _conversations(tenant_id, cid)
        own = {
            s.id: s
            for s in self.session.scalars(
                select(Summary).where(Summary.conversation_id.in_(conversations))
            )
        }
        shown = set(
            self.session.scalars(
                select(ContextItem.summary_id).where(
                    ContextItem.conversation_id.in_(conversations),
                    ContextItem.summary_id.is_not(None),
                )
            )
        )
        others = shown - set(own)
        if others:
            own.update(
                (s.id, s)
                for s in self.session.scalars(select(Summary).where(Summary.id.in_(others)))
            )
        return list(own.values())

    def parent_ids(self, summary_ids: Collection[str]) -> dict[str, list[str]]:
        parents: dict[str, list[str]] = {}
        for sid, parent in self.session.execute(
            select(SummaryParent.summary_id, SummaryParent.parent_id)
            .where(SummaryParent.summary_id.in_(summary_ids))
            .order_by(SummaryParent.summary_id, SummaryParent.ordinal)
        ):
            parents.setdefault(str(sid), []).append(str(parent))
        return parents

    def item_costs(
        self, tenant_id: str, cid: int | None
    ) -> list[tuple[int, int, int, int | None, str | None, int]]:
        """(conversation id, item id, ordinal, message id, summary id, token count) of items."""
        stmt = select(
            ContextItem.conversation_id,
            ContextItem.id,
            ContextItem.ordinal,
            ContextItem.message_id,
            ContextItem.summary_id,
            ContextItem.token_count,
        ).where(ContextItem.conversation_id.in_(_conversations(tenant_id, cid)))
        return [tuple(row) for row in self.session.execute(stmt)]  # type: ignore[misc]

    def misranged(self, tenant_id: str, cid: int | None) -> list[tuple[int, str]]:
        """(conversation id, summary id) of summaries whose stored source range is wrong."""
        return SourceRangeRepository(self.session).mismatched(_conversations(tenant_id, cid))

    def session_keys(self, conversation_ids: Collection[int]) -> dict[int, str]:
        return {
            int(cid): str(key)
            for cid, key in self.session.execute(
                select(Conversation.id, Conversation.session_key).where(
                    Conversation.id.in_(conversation_ids)
                )
            )
        }

    # --- repairs ----------------------------------------------------------

    def lock(self, conversation_id: int) -> Conversation | None:
        """Row-lock the conversation: orders the repair with ingest and compaction commits."""
        return self.session.scalar(
            select(Conversation).where(Conversation.id == conversation_id).with_for_update()
        )

    def drop_items(self, conversation_id: int, ordinals: Collection[int]) -> int:
        result = self.session.execute(
            delete(ContextItem).where(
                ContextItem.conversation_id == conversation_id, ContextItem.ordinal.in_(ordinals)
            )
        )
        return int(result.rowcount or 0)  # type: ignore[attr-defined]

    def set_tokens(
        self,
        model: type[Message] | type[Summary] | type[ContextItem],
        row_id: int | str,
        tokens: int,
    ) -> None:
        self.session.execute(update(model).where(model.id == row_id).values(token_count=tokens))

    def recompute_ranges(self, conversation_id: int) -> int:
        """Every source range of the conversation's summaries again, bottom-up."""
        return SourceRangeRepository(self.session).recompute_conversation(conversation_id)

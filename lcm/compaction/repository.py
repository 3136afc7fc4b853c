"""All SQL of compaction: loading the context, writing a pass, its history."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import ColumnElement, Select, Table, and_, delete, func, insert, select, update
from sqlalchemy.orm import Session

from lcm.context import ContentShape, ContextEntry, MessageView, PartView, Role, SummaryView
from lcm.db.models import (
    CompactionRun,
    ContextItem,
    Conversation,
    LlmUsage,
    Message,
    MessagePart,
    Summary,
    SummaryMessage,
    SummaryParent,
)

SUMMARY_MESSAGES: Table = SummaryMessage.__table__  # type: ignore[assignment]
SUMMARY_PARENTS: Table = SummaryParent.__table__  # type: ignore[assignment]


class CompactionRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    # --- reading the context ---------------------------------------------

    def load_entries(
        self, conversation_id: int, from_ordinal: int | None = None
    ) -> list[ContextEntry]:
        """The conversation's context items in order, with their messages and summaries.

        Four queries whatever the size: items+messages, parts, items+summaries,
        parents. ``from_ordinal`` limits them to a suffix of the context.
        """
        window = ContextItem.conversation_id == conversation_id
        if from_ordinal is not None:
            window = and_(window, ContextItem.ordinal >= from_ordinal)
        items = self.session.execute(
            select(
                ContextItem.ordinal,
                ContextItem.token_count,
                ContextItem.message_id,
                ContextItem.summary_id,
            )
            .where(window)
            .order_by(ContextItem.ordinal)
        ).all()
        messages = self._message_views(window)
        summaries = self._summary_views(window)
        entries = []
        for ordinal, tokens, message_id, summary_id in items:
            if message_id is not None:
                entries.append(ContextEntry(ordinal, tokens, message=messages[message_id]))
            else:
                entries.append(ContextEntry(ordinal, tokens, summary=summaries[str(summary_id)]))
        return entries

    def latest_turn_start(self, conversation_id: int, before: int) -> int | None:
        """Ordinal of the newest turn-starting user message before ``before``, in the raw run.

        A user message starts a turn unless it carries tool results; a summary
        ends the trailing run of raw messages, so only messages after the
        newest summary count. The fresh tail never splits this turn.
        """
        in_conversation = ContextItem.conversation_id == conversation_id
        newest_summary = (
            select(func.coalesce(func.max(ContextItem.ordinal), 0))
            .where(in_conversation, ContextItem.summary_id.is_not(None))
            .scalar_subquery()
        )
        answers_a_tool = (
            select(MessagePart.id)
            .where(MessagePart.message_id == Message.id, MessagePart.part_type == "tool_result")
            .exists()
        )
        ordinal = self.session.scalar(
            select(ContextItem.ordinal)
            .join(Message, Message.id == ContextItem.message_id)
            .where(
                in_conversation,
                ContextItem.ordinal > newest_summary,
                ContextItem.ordinal < before,
                Message.role == "user",
                ~answers_a_tool,
            )
            .order_by(ContextItem.ordinal.desc())
            .limit(1)
        )
        return None if ordinal is None else int(ordinal)

    def _message_views(self, window: ColumnElement[bool]) -> dict[int, MessageView]:
        in_window = select(ContextItem.message_id).where(
            window, ContextItem.message_id.is_not(None)
        )
        return load_message_views(self.session, in_window)

    def _summary_views(self, window: ColumnElement[bool]) -> dict[str, SummaryView]:
        in_context = and_(window, ContextItem.summary_id.is_not(None))
        parents: dict[str, list[str]] = defaultdict(list)
        for summary_id, parent_id in self.session.execute(
            select(SummaryParent.summary_id, SummaryParent.parent_id)
            .join(ContextItem, ContextItem.summary_id == SummaryParent.summary_id)
            .where(in_context)
            .order_by(SummaryParent.summary_id, SummaryParent.ordinal)
        ):
            parents[summary_id].append(parent_id)
        rows = self.session.scalars(
            select(Summary)
            .join(ContextItem, ContextItem.summary_id == Summary.id)
            .where(in_context)
        )
        return {s.id: summary_view(s, parents[s.id]) for s in rows}

    def context_token_total(self, conversation_id: int) -> int:
        """What the whole context costs: the sum the threshold is checked against."""
        return int(
            self.session.scalar(
                select(func.coalesce(func.sum(ContextItem.token_count), 0)).where(
                    ContextItem.conversation_id == conversation_id
                )
            )
            or 0
        )

    def range_items(self, conversation_id: int, first: int, last: int) -> list[tuple[Any, ...]]:
        """(ordinal, message_id, summary_id) of the items in an ordinal range."""
        return [
            tuple(r)
            for r in self.session.execute(
                select(ContextItem.ordinal, ContextItem.message_id, ContextItem.summary_id)
                .where(
                    ContextItem.conversation_id == conversation_id,
                    ContextItem.ordinal.between(first, last),
                )
                .order_by(ContextItem.ordinal)
            )
        ]

    def lock_conversation(self, conversation_id: int) -> Conversation | None:
        """Row-lock the conversation: serializes a pass's commit with ingest."""
        return self.session.scalar(
            select(Conversation).where(Conversation.id == conversation_id).with_for_update()
        )

    # --- writing a pass ---------------------------------------------------

    def insert_summary(self, summary: Summary) -> None:
        self.session.add(summary)
        self.session.flush()

    def link_messages(self, tenant_id: str, summary_id: str, message_ids: Sequence[int]) -> None:
        self.session.execute(
            insert(SUMMARY_MESSAGES),
            [
                {"summary_id": summary_id, "message_id": mid, "tenant_id": tenant_id, "ordinal": i}
                for i, mid in enumerate(message_ids)
            ],
        )

    def link_parents(self, tenant_id: str, summary_id: str, parent_ids: Sequence[str]) -> None:
        self.session.execute(
            insert(SUMMARY_PARENTS),
            [
                {"summary_id": summary_id, "parent_id": pid, "tenant_id": tenant_id, "ordinal": i}
                for i, pid in enumerate(parent_ids)
            ],
        )

    def replace_range(
        self,
        tenant_id: str,
        conversation_id: int,
        first: int,
        last: int,
        summary_id: str,
        token_count: int,
    ) -> None:
        """Swap the items in [first, last] for one summary item at ``first``.

        Only the replaced rows are touched: other ordinals never move, so the
        cost of a pass does not grow with the conversation.
        """
        self.session.execute(
            delete(ContextItem).where(
                ContextItem.conversation_id == conversation_id,
                ContextItem.ordinal.between(first, last),
            )
        )
        self.session.add(
            ContextItem(
                tenant_id=tenant_id,
                conversation_id=conversation_id,
                ordinal=first,
                item_type="summary",
                summary_id=summary_id,
                token_count=token_count,
            )
        )
        self.session.execute(
            update(Conversation)
            .where(Conversation.id == conversation_id)
            .values(context_version=Conversation.context_version + 1)
        )
        self.session.flush()

    def nth_newest_run_since(
        self, conversation_id: int, since: datetime, n: int
    ) -> datetime | None:
        """When the ``n``-th newest pass since ``since`` ran; None if fewer ran.

        Every pass (a summary, a repair, a failure) is one summarization call
        for the per-conversation rate limit.
        """
        return self.session.scalar(
            select(CompactionRun.created_at)
            .where(
                CompactionRun.conversation_id == conversation_id,
                CompactionRun.created_at >= since,
            )
            .order_by(CompactionRun.created_at.desc(), CompactionRun.id.desc())
            .offset(n - 1)
            .limit(1)
        )

    def record_run(self, run: CompactionRun) -> None:
        self.session.add(run)

    def record_usage(self, rows: Sequence[LlmUsage]) -> None:
        self.session.add_all(rows)

    # --- reading the DAG --------------------------------------------------

    def reachable_message_ids(self, conversation_id: int) -> list[int]:
        """Every message id reachable from the current context, with repetition.

        Walks context items -> summaries -> parent summaries -> source messages.
        Lossless means this is each of the conversation's messages exactly once.
        """
        in_context = ContextItem.conversation_id == conversation_id
        found: list[int] = list(
            self.session.scalars(
                select(ContextItem.message_id).where(
                    in_context, ContextItem.message_id.is_not(None)
                )
            )
        )
        frontier = list(
            self.session.scalars(
                select(ContextItem.summary_id).where(
                    in_context, ContextItem.summary_id.is_not(None)
                )
            )
        )
        while frontier:
            found.extend(
                self.session.scalars(
                    select(SummaryMessage.message_id).where(SummaryMessage.summary_id.in_(frontier))
                )
            )
            frontier = list(
                self.session.scalars(
                    select(SummaryParent.parent_id).where(SummaryParent.summary_id.in_(frontier))
                )
            )
        return found

    def summary_counts_by_depth(self, conversation_id: int) -> dict[int, int]:
        return {
            int(depth): int(count)
            for depth, count in self.session.execute(
                select(Summary.depth, func.count())
                .where(Summary.conversation_id == conversation_id)
                .group_by(Summary.depth)
            )
        }


def load_message_views(
    session: Session, message_ids: Sequence[int] | Select[int | None]
) -> dict[int, MessageView]:
    """Messages with their parts, enough to rebuild each exactly as it was sent.

    ``message_ids`` is a list or a subquery. A plain-string message has one
    text part equal to its content (ingest guarantees it), so only block
    messages read their parts.
    """
    parts: dict[int, list[PartView]] = defaultdict(list)
    for message_id, part_type, payload, tool_call_id, text in session.execute(
        select(
            MessagePart.message_id,
            MessagePart.part_type,
            MessagePart.payload,
            MessagePart.tool_call_id,
            MessagePart.text,
        )
        .join(Message, Message.id == MessagePart.message_id)
        .where(MessagePart.message_id.in_(message_ids), Message.content_shape == "blocks")
        .order_by(MessagePart.message_id, MessagePart.ordinal)
    ):
        parts[message_id].append(PartView(part_type, payload, tool_call_id, text))
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

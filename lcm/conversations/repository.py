"""All SQL about conversation rows, their status and the DAG view."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import Table, delete, func, insert, select, update
from sqlalchemy.orm import Session

from lcm.db.models import (
    CompactionRun,
    ContextItem,
    Conversation,
    Message,
    Summary,
    SummaryMessage,
    utcnow,
)


class ConversationRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, tenant_id: str, conversation_id: int) -> Conversation | None:
        return self.session.scalar(
            select(Conversation).where(
                Conversation.tenant_id == tenant_id, Conversation.id == conversation_id
            )
        )

    def find_by_session_id(
        self, tenant_id: str, session_key: str, session_id: str, *, lock: bool = False
    ) -> Conversation | None:
        stmt = select(Conversation).where(
            Conversation.tenant_id == tenant_id,
            Conversation.session_key == session_key,
            Conversation.session_id == session_id,
        )
        if lock:
            stmt = stmt.with_for_update()
        return self.session.scalar(stmt)

    def find_active(
        self, tenant_id: str, session_key: str, *, lock: bool = False
    ) -> Conversation | None:
        stmt = select(Conversation).where(
            Conversation.tenant_id == tenant_id,
            Conversation.session_key == session_key,
            Conversation.archived_at.is_(None),
        )
        if lock:
            stmt = stmt.with_for_update()
        return self.session.scalar(stmt)

    def find_latest(self, tenant_id: str, session_key: str) -> Conversation | None:
        """The active conversation of a family, else its most recent one."""
        return self.session.scalar(
            select(Conversation)
            .where(Conversation.tenant_id == tenant_id, Conversation.session_key == session_key)
            .order_by(Conversation.archived_at.is_not(None), Conversation.id.desc())
            .limit(1)
        )

    def page(
        self,
        tenant_id: str,
        *,
        before_id: int | None,
        limit: int,
        key_prefix: str | None,
        archived: bool | None,
        updated_since: datetime | None,
    ) -> list[tuple[Conversation, int]]:
        """Newest first, ids below ``before_id``: (conversation, context tokens) rows."""
        context_tokens = (
            select(func.coalesce(func.sum(ContextItem.token_count), 0))
            .where(ContextItem.conversation_id == Conversation.id)
            .scalar_subquery()
        )
        stmt = select(Conversation, context_tokens).where(Conversation.tenant_id == tenant_id)
        if before_id is not None:
            stmt = stmt.where(Conversation.id < before_id)
        if key_prefix:
            # substr, not LIKE: exact on both databases (SQLite's LIKE ignores
            # ASCII case) and no wildcard in a key to escape.
            stmt = stmt.where(
                func.substr(Conversation.session_key, 1, len(key_prefix)) == key_prefix
            )
        if archived is not None:
            stmt = stmt.where(
                Conversation.archived_at.is_not(None)
                if archived
                else Conversation.archived_at.is_(None)
            )
        if updated_since is not None:
            stmt = stmt.where(Conversation.updated_at >= updated_since)
        rows = self.session.execute(stmt.order_by(Conversation.id.desc()).limit(limit))
        return [(conversation, int(tokens)) for conversation, tokens in rows]

    def add(self, conversation: Conversation) -> Conversation:
        self.session.add(conversation)
        self.session.flush()
        return conversation

    def archive(self, conversation: Conversation, when: datetime) -> None:
        conversation.archived_at = when
        self.session.flush()

    def remember_model(
        self, conversation_id: int, model_id: str | None, context_window: int | None
    ) -> None:
        """Record what a turn named (only what it named: None leaves the stored value)."""
        values: dict[str, Any] = {}
        if model_id is not None:
            values["model_id"] = model_id
        if context_window is not None:
            values["context_window"] = context_window
        if values:
            self.session.execute(
                update(Conversation).where(Conversation.id == conversation_id).values(values)
            )

    def model_of(self, conversation_id: int) -> tuple[str | None, int | None]:
        row = self.session.execute(
            select(Conversation.model_id, Conversation.context_window).where(
                Conversation.id == conversation_id
            )
        ).one_or_none()
        return (None, None) if row is None else (row[0], row[1])

    def advance_counters(
        self, conversation_id: int, *, seq_by: int, ordinal_by: int
    ) -> tuple[int, int]:
        """Reserve ``seq_by`` seqs and ``ordinal_by`` ordinals; return the new maxima.

        Runs while the conversation row is locked by this transaction, so the
        reserved ranges are this writer's alone. Writing messages (``seq_by``
        > 0) is activity: it moves ``updated_at``, which retention reads.
        """
        values: dict[str, Any] = {
            "last_seq": Conversation.last_seq + seq_by,
            "last_ordinal": Conversation.last_ordinal + ordinal_by,
            "context_version": Conversation.context_version + 1,
        }
        if seq_by > 0:
            values["updated_at"] = utcnow()
        row = self.session.execute(
            update(Conversation)
            .where(Conversation.id == conversation_id)
            .values(values)
            .returning(Conversation.last_seq, Conversation.last_ordinal)
        ).one()
        return int(row[0]), int(row[1])

    def last_run(self, conversation_id: int) -> CompactionRun | None:
        """The newest compaction pass of the conversation, successful or not."""
        return self.session.scalar(
            select(CompactionRun)
            .where(CompactionRun.conversation_id == conversation_id)
            .order_by(CompactionRun.id.desc())
            .limit(1)
        )


CONTEXT_ITEMS: Table = ContextItem.__table__  # type: ignore[assignment]
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


class CarryOverRepository:
    """What a new session of a family starts with (``lcm.conversations.carry_over``)."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def context_summaries(self, conversation_id: int, min_depth: int) -> list[tuple[str, int]]:
        """(summary id, context token count) of the context's summaries at ``min_depth``+."""
        return [
            (str(summary_id), int(tokens))
            for summary_id, tokens in self.session.execute(
                select(ContextItem.summary_id, ContextItem.token_count)
                .join(Summary, Summary.id == ContextItem.summary_id)
                .where(ContextItem.conversation_id == conversation_id, Summary.depth >= min_depth)
                .order_by(ContextItem.ordinal)
            )
        ]

    def prune_context(self, conversation_id: int, min_depth: int) -> int:
        """Remove every context item but summaries of ``min_depth`` or deeper; how many went."""
        doomed = list(
            self.session.scalars(
                select(ContextItem.id)
                .outerjoin(Summary, Summary.id == ContextItem.summary_id)
                .where(
                    ContextItem.conversation_id == conversation_id,
                    ContextItem.summary_id.is_(None) | (Summary.depth < min_depth),
                )
            )
        )
        for start in range(0, len(doomed), 500):  # within any driver's bind limit
            self.session.execute(
                delete(ContextItem).where(ContextItem.id.in_(doomed[start : start + 500]))
            )
        return len(doomed)

    def append_summary_items(
        self,
        tenant_id: str,
        conversation_id: int,
        first_ordinal: int,
        items: list[tuple[str, int]],
    ) -> None:
        self.session.execute(
            insert(CONTEXT_ITEMS),
            [
                {
                    "tenant_id": tenant_id,
                    "conversation_id": conversation_id,
                    "ordinal": first_ordinal + i,
                    "item_type": "summary",
                    "summary_id": summary_id,
                    "token_count": tokens,
                }
                for i, (summary_id, tokens) in enumerate(items)
            ],
        )

"""All SQL of erasing: conversations with everything they hold, and whole tenants.

Deletes are explicit, children before parents, so what goes is readable here
rather than spread over ``ON DELETE`` clauses (those stay as a safety net: a
row a concurrent writer slipped in still goes with its conversation). Search
rows need no statement: Postgres keeps them in generated columns of the rows
deleted, and SQLite's FTS tables follow their rows through triggers
(migration 0002).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

from sqlalchemy import Select, Table, delete, func, or_, select, update
from sqlalchemy.orm import InstrumentedAttribute, Session, aliased

from lcm.db.models import (
    Base,
    CompactionDebt,
    CompactionRun,
    ContextItem,
    Conversation,
    ConversationFork,
    Embedding,
    ExpansionGrant,
    HostUsage,
    LargeFile,
    LlmUsage,
    Message,
    MessagePart,
    SecretSpan,
    Summary,
    SummaryMessage,
    SummaryOperation,
    SummaryParent,
    Tenant,
    TurnCommit,
)
from lcm.message_cache import MESSAGE_CACHE, MessageCache
from lcm.progress import OnProgress, no_progress
from lcm.window_cache import WINDOW_CACHE, WindowCache

Attribute = InstrumentedAttribute[Any]

# Tables whose rows belong to a tenant through a parent row, with no index
# on their own ``tenant_id`` (``lcm.db.models.base.owned_tenant``): (the
# column naming the parent, the parent's id, the parent's tenant_id). A
# tenant's erasure deletes them first, while their parents still exist.
OWNED_THROUGH: tuple[tuple[Attribute, Attribute, Attribute], ...] = (
    (MessagePart.message_id, Message.id, Message.tenant_id),
    (ContextItem.conversation_id, Conversation.id, Conversation.tenant_id),
    (SummaryMessage.summary_id, Summary.id, Summary.tenant_id),
    (SummaryParent.summary_id, Summary.id, Summary.tenant_id),
    (SecretSpan.conversation_id, Conversation.id, Conversation.tenant_id),
)


class ErasureRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def lock_conversations(self, tenant_id: str, ids: Collection[int]) -> list[int]:
        """Lock the tenant's conversations among ``ids`` (in id order); return those found.

        The row lock is what ingest takes before it writes a message, so no
        message lands in a conversation while it is being erased; locking in
        id order keeps two overlapping erases from deadlocking.
        """
        return list(
            self.session.scalars(
                select(Conversation.id)
                .where(Conversation.tenant_id == tenant_id, Conversation.id.in_(ids))
                .order_by(Conversation.id)
                .with_for_update()
            )
        )

    def family_ids(self, tenant_id: str, session_key: str) -> list[int]:
        return list(
            self.session.scalars(
                select(Conversation.id).where(
                    Conversation.tenant_id == tenant_id, Conversation.session_key == session_key
                )
            )
        )

    def tenant_conversation_ids(self, tenant_id: str) -> list[int]:
        return list(
            self.session.scalars(select(Conversation.id).where(Conversation.tenant_id == tenant_id))
        )

    def idle_conversation_ids(self, tenant_id: str, idle_before: datetime, limit: int) -> list[int]:
        """Conversations with no message written since ``idle_before``, oldest first."""
        return list(
            self.session.scalars(
                select(Conversation.id)
                .where(Conversation.tenant_id == tenant_id, Conversation.updated_at < idle_before)
                .order_by(Conversation.updated_at)
                .limit(limit)
            )
        )

    def is_idle(self, conversation_id: int, idle_before: datetime) -> bool:
        updated = self.session.scalar(
            select(Conversation.updated_at).where(Conversation.id == conversation_id)
        )
        return updated is not None and updated < idle_before

    def referencing_conversations(self, ids: Collection[int]) -> list[int]:
        """Other conversations whose context or DAG points at these conversations' summaries.

        A new session may start from an archived one's summaries, and a fork
        child from its parent's; their context items and condensed summaries
        then reference summaries that erasing ``ids`` would delete.
        """
        erased = self._summary_ids(ids)
        in_context = select(ContextItem.conversation_id).where(
            ContextItem.summary_id.in_(erased), ContextItem.conversation_id.not_in(ids)
        )
        child = aliased(Summary)
        in_dag = (
            select(child.conversation_id)
            .join(SummaryParent, SummaryParent.summary_id == child.id)
            .where(SummaryParent.parent_id.in_(erased), child.conversation_id.not_in(ids))
        )
        return sorted(set(self.session.scalars(in_context.union(in_dag))))

    def stored_totals(self, conversation_ids: Collection[int]) -> tuple[int, int]:
        """(messages, large-file bytes) of the conversations: what their tenant was charged."""
        messages = self.session.scalar(
            select(func.count())
            .select_from(Message)
            .where(Message.conversation_id.in_(list(conversation_ids)))
        )
        file_bytes = self.session.scalar(
            select(func.coalesce(func.sum(LargeFile.byte_size), 0)).where(
                LargeFile.conversation_id.in_(list(conversation_ids))
            )
        )
        return int(messages or 0), int(file_bytes or 0)

    def storage_uris(self, conversation_ids: Collection[int]) -> set[str]:
        return set(
            self.session.scalars(
                select(LargeFile.storage_uri).where(LargeFile.conversation_id.in_(conversation_ids))
            )
        )

    def tenant_storage_uris(self, tenant_id: str) -> set[str]:
        return set(
            self.session.scalars(
                select(LargeFile.storage_uri).where(LargeFile.tenant_id == tenant_id)
            )
        )

    def referenced_uris(self, tenant_id: str, uris: Collection[str]) -> set[str]:
        """The URIs among ``uris`` (the tenant's blobs) that a file row of the tenant still names.

        Storage keys a blob by its tenant and digest (``FileStorage.put``), so
        only the tenant's own rows can name it.
        """
        return set(
            self.session.scalars(
                select(LargeFile.storage_uri)
                .where(LargeFile.tenant_id == tenant_id, LargeFile.storage_uri.in_(uris))
                .distinct()
            )
        )

    def grants_naming(self, tenant_id: str, ids: Collection[int]) -> list[str]:
        """Expansion grants of the tenant scoped to any of ``ids``.

        The scope is a JSON list, so it is matched here; grants are few per
        tenant (they expire within minutes and beat deletes them a day later).
        """
        wanted = set(ids)
        return [
            grant_id
            for grant_id, scope in self.session.execute(
                select(ExpansionGrant.id, ExpansionGrant.conversation_ids).where(
                    ExpansionGrant.tenant_id == tenant_id
                )
            )
            if wanted.intersection(scope or [])
        ]

    def delete_conversations(self, tenant_id: str, ids: Collection[int]) -> int:
        """Delete ``ids`` and everything they hold; return how many rows went.

        The debt row goes first: a compaction pass commits only after locking
        it (``check_fence``), so once it is gone (or this transaction holds
        its lock) no pass can write into these conversations any more.
        """
        if not ids:
            return 0
        cache: MessageCache | None = self.session.info.get(MESSAGE_CACHE)
        if cache is not None:
            # This process's views of their messages (other processes' views
            # can no longer be reached and age out: see lcm/message_cache.py).
            cache.forget_conversations(ids)
        windows: WindowCache | None = self.session.info.get(WINDOW_CACHE)
        if windows is not None:
            # Their windows could no longer be served (their stamps are gone
            # with them, see lcm/window_cache.py): only the memory is freed.
            windows.forget_conversations(ids)
        summaries = self._summary_ids(ids)
        messages = select(Message.id).where(Message.conversation_id.in_(ids))
        statements = [
            delete(CompactionDebt).where(CompactionDebt.conversation_id.in_(ids)),
            delete(ExpansionGrant).where(ExpansionGrant.id.in_(self.grants_naming(tenant_id, ids))),
            delete(ContextItem).where(ContextItem.conversation_id.in_(ids)),
            # One delete per indexed column: with the two conditions ORed,
            # Postgres read the whole link table, every tenant's links.
            delete(SummaryParent).where(SummaryParent.summary_id.in_(summaries)),
            delete(SummaryParent).where(SummaryParent.parent_id.in_(summaries)),
            delete(SummaryMessage).where(SummaryMessage.summary_id.in_(summaries)),
            delete(SummaryMessage).where(SummaryMessage.message_id.in_(messages)),
            delete(Summary).where(Summary.conversation_id.in_(ids)),
            delete(SecretSpan).where(SecretSpan.conversation_id.in_(ids)),
            delete(Embedding).where(Embedding.conversation_id.in_(ids)),
            delete(LargeFile).where(LargeFile.conversation_id.in_(ids)),
            delete(MessagePart).where(MessagePart.message_id.in_(messages)),
            delete(Message).where(Message.conversation_id.in_(ids)),
            delete(TurnCommit).where(TurnCommit.conversation_id.in_(ids)),
            delete(ConversationFork).where(
                or_(
                    ConversationFork.child_conversation_id.in_(ids),
                    ConversationFork.parent_conversation_id.in_(ids),
                )
            ),
            delete(CompactionRun).where(CompactionRun.conversation_id.in_(ids)),
            delete(SummaryOperation).where(SummaryOperation.conversation_id.in_(ids)),
            # Usage is billing history: it stays, no longer linked to the conversation.
            update(LlmUsage).where(LlmUsage.conversation_id.in_(ids)).values(conversation_id=None),
            update(HostUsage)
            .where(HostUsage.conversation_id.in_(ids))
            .values(conversation_id=None),
            delete(Conversation).where(Conversation.id.in_(ids)),
        ]
        return sum(self._rowcount(stmt) for stmt in statements)

    def delete_tenant(self, tenant_id: str, on_progress: OnProgress = no_progress) -> int:
        """Delete every row of the tenant in every table; return how many rows went.

        The rows owned through a parent go first, by their parents' ids
        (``OWNED_THROUGH``): those tables have no index on ``tenant_id``,
        and a delete by it would scan every tenant's rows. Every other table
        comes from the models' metadata, children first, and is deleted by
        its indexed ``tenant_id``, so a table added later is erased without
        a change here (``tests/unit/db/test_tenant_erasure_paths.py`` checks
        that each table is one or the other). ``on_progress`` hears of each
        statement done, out of all of them.
        """
        statements: list[Any] = [
            delete(CompactionDebt).where(CompactionDebt.tenant_id == tenant_id)
        ]
        for column, parent_id, parent_tenant in OWNED_THROUGH:
            parents = select(parent_id).where(parent_tenant == tenant_id)
            statements.append(delete(column.table).where(column.in_(parents)))
        owned = {column.table.name for column, _, _ in OWNED_THROUGH}
        for table in reversed(_tables()):
            if "tenant_id" in table.c and table.name not in owned:
                statements.append(delete(table).where(table.c.tenant_id == tenant_id))
        statements.append(delete(Tenant).where(Tenant.id == tenant_id))
        count = 0
        for done, statement in enumerate(statements, 1):
            count += self._rowcount(statement)
            on_progress(done, len(statements))
        return count

    def _summary_ids(self, ids: Collection[int]) -> Select[Any]:
        return select(Summary.id).where(Summary.conversation_id.in_(ids))

    def _rowcount(self, statement: object) -> int:
        result = self.session.execute(statement)  # type: ignore[call-overload]
        return max(int(getattr(result, "rowcount", 0) or 0), 0)


def _tables() -> list[Table]:
    return Base.metadata.sorted_tables

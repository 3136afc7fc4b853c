"""SQL for scopes and for walking the summary DAG (describe, expand).

Every lookup by id is also filtered by tenant: an id of another tenant reads
exactly like an id that does not exist.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from lcm.context import MessageView
from lcm.context_store.repository import load_message_views
from lcm.db.models import (
    ContextItem,
    Conversation,
    LargeFile,
    Message,
    Summary,
    SummaryMessage,
    SummaryParent,
)

_CHUNK = 500  # ids per IN (...) list


@dataclass(frozen=True, slots=True)
class MessageSize:
    id: int
    conversation_id: int
    seq: int
    token_count: int


class HistoryRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    # --- scopes -----------------------------------------------------------------

    def family_conversation_ids(self, tenant_id: str, session_key: str) -> list[int]:
        return list(
            self.session.scalars(
                select(Conversation.id)
                .where(Conversation.tenant_id == tenant_id, Conversation.session_key == session_key)
                .order_by(Conversation.id)
            )
        )

    def owns_conversation(self, tenant_id: str, conversation_id: int) -> bool:
        found = self.session.scalar(
            select(Conversation.id).where(
                Conversation.tenant_id == tenant_id, Conversation.id == conversation_id
            )
        )
        return found is not None

    def tenant_conversation_ids(self, tenant_id: str, limit: int | None) -> list[int]:
        """Up to ``limit`` (``None``: all) conversation ids of the tenant, newest first."""
        return list(
            self.session.scalars(
                select(Conversation.id)
                .where(Conversation.tenant_id == tenant_id)
                .order_by(Conversation.id.desc())
                .limit(limit)
            )
        )

    def session_key_of(self, conversation_id: int) -> str | None:
        return self.session.scalar(
            select(Conversation.session_key).where(Conversation.id == conversation_id)
        )

    def session_keys(self, tenant_id: str, conversation_ids: Sequence[int]) -> dict[int, str]:
        """Each of the tenant's ``conversation_ids`` with its session key."""
        if not conversation_ids:
            return {}
        rows = self.session.execute(
            select(Conversation.id, Conversation.session_key).where(
                Conversation.tenant_id == tenant_id, Conversation.id.in_(list(conversation_ids))
            )
        )
        return {int(cid): str(key) for cid, key in rows}

    # --- summaries ------------------------------------------------------------------

    def summaries(self, tenant_id: str, summary_ids: Sequence[str]) -> dict[str, Summary]:
        if not summary_ids:
            return {}
        rows = self.session.scalars(
            select(Summary).where(Summary.tenant_id == tenant_id, Summary.id.in_(summary_ids))
        )
        return {s.id: s for s in rows}

    def sources_of(self, summary_ids: Sequence[str]) -> dict[str, list[str]]:
        """Condensed summary -> the summaries it was made from, in order."""
        out: dict[str, list[str]] = defaultdict(list)
        ids = list(summary_ids)
        for start in range(0, len(ids), _CHUNK):  # bounded IN lists for wide DAG levels
            for summary_id, parent_id in self.session.execute(
                select(SummaryParent.summary_id, SummaryParent.parent_id)
                .where(SummaryParent.summary_id.in_(ids[start : start + _CHUNK]))
                .order_by(SummaryParent.summary_id, SummaryParent.ordinal)
            ):
                out[summary_id].append(parent_id)
        return out

    def condensed_into(self, summary_id: str) -> list[str]:
        """The summaries that were made from this one (the next depth up)."""
        return list(
            self.session.scalars(
                select(SummaryParent.summary_id)
                .where(SummaryParent.parent_id == summary_id)
                .order_by(SummaryParent.summary_id)
            )
        )

    def in_context(self, summary_id: str) -> bool:
        found = self.session.scalar(
            select(ContextItem.id).where(ContextItem.summary_id == summary_id).limit(1)
        )
        return found is not None

    def summaries_citing_file(self, conversation_id: int, file_id: str) -> list[str]:
        # file_ids is a JSON list; the per-conversation set is small enough to
        # filter here instead of writing two dialects of JSON containment.
        rows = self.session.execute(
            select(Summary.id, Summary.file_ids)
            .where(Summary.conversation_id == conversation_id)
            .order_by(Summary.earliest_at)
        )
        return [sid for sid, file_ids in rows if file_id in (file_ids or [])]

    # --- messages -------------------------------------------------------------------

    def leaf_messages(self, leaf_ids: Sequence[str]) -> dict[str, list[MessageSize]]:
        """Leaf summary -> its source messages (sizes only, no text), in order."""
        out: dict[str, list[MessageSize]] = defaultdict(list)
        if leaf_ids:
            for summary_id, mid, cid, seq, tokens in self.session.execute(
                select(
                    SummaryMessage.summary_id,
                    Message.id,
                    Message.conversation_id,
                    Message.seq,
                    Message.token_count,
                )
                .join(Message, Message.id == SummaryMessage.message_id)
                .where(SummaryMessage.summary_id.in_(leaf_ids))
                .order_by(SummaryMessage.summary_id, SummaryMessage.ordinal)
            ):
                out[summary_id].append(MessageSize(mid, cid, seq, tokens))
        return out

    def leaf_totals(self, leaf_ids: Sequence[str]) -> tuple[int, int, int | None, int | None]:
        """(messages, tokens, first seq, last seq) under the given leaf summaries."""
        if not leaf_ids:
            return 0, 0, None, None
        count, tokens, first, last = self.session.execute(
            select(
                func.count(),
                func.coalesce(func.sum(Message.token_count), 0),
                func.min(Message.seq),
                func.max(Message.seq),
            )
            .select_from(SummaryMessage)
            .join(Message, Message.id == SummaryMessage.message_id)
            .where(SummaryMessage.summary_id.in_(leaf_ids))
        ).one()
        return int(count), int(tokens), first, last

    def message_views(self, message_ids: Sequence[int]) -> dict[int, MessageView]:
        """The messages with their stored parts, enough to rebuild them exactly."""
        return load_message_views(self.session, message_ids) if message_ids else {}

    def message_seq(self, message_id: int) -> int | None:
        return self.session.scalar(select(Message.seq).where(Message.id == message_id))

    # --- files --------------------------------------------------------------------

    def large_file(self, tenant_id: str, file_id: str) -> LargeFile | None:
        return self.session.scalar(
            select(LargeFile).where(LargeFile.tenant_id == tenant_id, LargeFile.id == file_id)
        )

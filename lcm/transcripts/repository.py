"""All SQL of bootstrap reconciliation: stored ids, recent messages, the checkpoint."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from lcm.db.models import Conversation, Message, MessagePart
from lcm.transcripts.anchor import StoredMessage

# Bound parameters per IN list: well under every driver's limit.
_CHUNK = 500


class TranscriptRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def seqs_for_client_ids(
        self, conversation_id: int, client_ids: Sequence[str]
    ) -> dict[str, int]:
        """``client_id → seq`` for those of ``client_ids`` stored in the conversation."""
        found: dict[str, int] = {}
        wanted = list(dict.fromkeys(client_ids))
        for start in range(0, len(wanted), _CHUNK):
            for client_id, seq in self.session.execute(
                select(Message.client_id, Message.seq).where(
                    Message.conversation_id == conversation_id,
                    Message.client_id.in_(wanted[start : start + _CHUNK]),
                )
            ):
                found[str(client_id)] = int(seq)
        return found

    def newest_messages(self, conversation_id: int, limit: int) -> list[StoredMessage]:
        """The conversation's newest messages, newest first."""
        return [
            StoredMessage(int(seq), role, content, created_at)
            for seq, role, content, created_at in self.session.execute(
                select(Message.seq, Message.role, Message.content, Message.created_at)
                .where(Message.conversation_id == conversation_id)
                .order_by(Message.seq.desc())
                .limit(limit)
            )
        ]

    def newest_created_at(self, conversation_id: int) -> datetime | None:
        value: datetime | None = self.session.scalar(
            select(func.max(Message.created_at)).where(Message.conversation_id == conversation_id)
        )
        return value

    def tool_pairs(self, conversation_id: int) -> int:
        """Tool calls of the conversation that have a result in it."""
        calls = self._call_ids(conversation_id, "tool_use")
        return len(calls & self._call_ids(conversation_id, "tool_result"))

    def _call_ids(self, conversation_id: int, part_type: str) -> set[str]:
        return {
            str(call_id)
            for call_id in self.session.scalars(
                select(MessagePart.tool_call_id)
                .join(Message, Message.id == MessagePart.message_id)
                .where(
                    Message.conversation_id == conversation_id,
                    MessagePart.part_type == part_type,
                    MessagePart.tool_call_id.is_not(None),
                )
            )
        }

    def save_checkpoint(self, conversation_id: int, checkpoint: dict[str, Any]) -> None:
        self.session.execute(
            update(Conversation)
            .where(Conversation.id == conversation_id)
            .values(bootstrap_checkpoint=checkpoint)
        )

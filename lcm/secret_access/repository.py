"""All SQL of reading originals and erasing secrets: audit rows, spans, rewritten rows."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from lcm.db.models import (
    ApiKey,
    ContextItem,
    Conversation,
    LargeFile,
    Message,
    MessagePart,
    SecretRead,
    SecretSpan,
    Summary,
)

_CHUNK = 500  # ids bound per statement: within every driver's limit


class SecretAccessRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    # Every query names the tenant: rows are distributed by it (docs/operations.md).

    # --- audit ---------------------------------------------------------------------

    def key_name(self, tenant_id: str, key_id: int) -> str:
        name = self.session.scalar(
            select(ApiKey.name).where(ApiKey.tenant_id == tenant_id, ApiKey.id == key_id)
        )
        return name or f"key {key_id}"

    def add_read(self, row: SecretRead) -> None:
        self.session.add(row)
        self.session.flush()

    def prune_reads(self, tenant_id: str, before: datetime) -> int:
        result = self.session.execute(
            delete(SecretRead).where(SecretRead.tenant_id == tenant_id, SecretRead.read_at < before)
        )
        return max(int(getattr(result, "rowcount", 0) or 0), 0)

    def reads(
        self,
        tenant_id: str,
        conversation_id: int | None,
        key_id: int | None,
        below_id: int | None,
        limit: int,
    ) -> list[SecretRead]:
        """Newest first, ids below ``below_id`` (the previous page's last)."""
        stmt = select(SecretRead).where(SecretRead.tenant_id == tenant_id)
        if conversation_id is not None:
            stmt = stmt.where(SecretRead.conversation_id == conversation_id)
        if key_id is not None:
            stmt = stmt.where(SecretRead.key_id == key_id)
        if below_id is not None:
            stmt = stmt.where(SecretRead.id < below_id)
        return list(self.session.scalars(stmt.order_by(SecretRead.id.desc()).limit(limit)))

    # --- spans ---------------------------------------------------------------------

    def live_message_spans(
        self, tenant_id: str, message_ids: Collection[int]
    ) -> list[tuple[int, int]]:
        """``(span id, conversation id)`` of the spans not erased in the messages."""
        ids = sorted(set(message_ids))
        found: list[tuple[int, int]] = []
        for start in range(0, len(ids), _CHUNK):
            rows = self.session.execute(
                select(SecretSpan.id, SecretSpan.conversation_id)
                .where(
                    SecretSpan.tenant_id == tenant_id,
                    SecretSpan.message_id.in_(ids[start : start + _CHUNK]),
                    SecretSpan.erased_at.is_(None),
                )
                .order_by(SecretSpan.id)
            )
            found.extend((int(a), int(b)) for a, b in rows)
        return found

    def live_file_spans(self, tenant_id: str, file_id: str, start: int, end: int) -> list[int]:
        """Ids of the file's spans not erased that reach into ``[start, end)``."""
        return list(
            self.session.scalars(
                select(SecretSpan.id)
                .where(
                    SecretSpan.tenant_id == tenant_id,
                    SecretSpan.file_id == file_id,
                    SecretSpan.erased_at.is_(None),
                    SecretSpan.char_offset < end,
                    SecretSpan.char_offset + SecretSpan.char_length > start,
                )
                .order_by(SecretSpan.id)
            )
        )

    def live_conversation_spans(self, tenant_id: str, conversation_id: int) -> list[int]:
        return list(
            self.session.scalars(
                select(SecretSpan.id)
                .where(
                    SecretSpan.tenant_id == tenant_id,
                    SecretSpan.conversation_id == conversation_id,
                    SecretSpan.erased_at.is_(None),
                )
                .order_by(SecretSpan.id)
            )
        )

    def spans_by_id(self, tenant_id: str, span_ids: Collection[int]) -> list[SecretSpan]:
        ids = sorted(set(span_ids))
        found: list[SecretSpan] = []
        for start in range(0, len(ids), _CHUNK):
            found.extend(
                self.session.scalars(
                    select(SecretSpan).where(
                        SecretSpan.tenant_id == tenant_id,
                        SecretSpan.id.in_(ids[start : start + _CHUNK]),
                    )
                )
            )
        return found

    def conversations_with_spans(self, tenant_id: str) -> list[int]:
        return [
            int(c)
            for c in self.session.scalars(
                select(SecretSpan.conversation_id)
                .where(SecretSpan.tenant_id == tenant_id)
                .distinct()
                .order_by(SecretSpan.conversation_id)
            )
        ]

    def spans_by_fingerprint(
        self, tenant_id: str, conversation_id: int, fingerprints: Collection[str]
    ) -> list[SecretSpan]:
        """The conversation's spans of these values (the (conversation, fingerprint) index)."""
        return list(
            self.session.scalars(
                select(SecretSpan).where(
                    SecretSpan.tenant_id == tenant_id,
                    SecretSpan.conversation_id == conversation_id,
                    SecretSpan.fingerprint.in_(sorted(set(fingerprints))),
                )
            )
        )

    def message_spans(self, tenant_id: str, message_ids: Collection[int]) -> list[SecretSpan]:
        """Every span of the messages, erased or not: all of them move when text is rewritten."""
        ids = sorted(set(message_ids))
        found: list[SecretSpan] = []
        for start in range(0, len(ids), _CHUNK):
            found.extend(
                self.session.scalars(
                    select(SecretSpan).where(
                        SecretSpan.tenant_id == tenant_id,
                        SecretSpan.message_id.in_(ids[start : start + _CHUNK]),
                    )
                )
            )
        return found

    # --- rewriting -----------------------------------------------------------------

    def lock_conversation(self, tenant_id: str, conversation_id: int) -> bool:
        """Take the conversation's row lock (Postgres; SQLite's writer is alone anyway)."""
        found = self.session.scalar(
            select(Conversation.id)
            .where(Conversation.tenant_id == tenant_id, Conversation.id == conversation_id)
            .with_for_update()
        )
        return found is not None

    def bump_context_version(self, conversation_id: int) -> None:
        self.session.execute(
            update(Conversation)
            .where(Conversation.id == conversation_id)
            .values(context_version=Conversation.context_version + 1)
        )

    def messages(self, tenant_id: str, message_ids: Collection[int]) -> list[Message]:
        ids = sorted(set(message_ids))
        found: list[Message] = []
        for start in range(0, len(ids), _CHUNK):
            found.extend(
                self.session.scalars(
                    select(Message).where(
                        Message.tenant_id == tenant_id, Message.id.in_(ids[start : start + _CHUNK])
                    )
                )
            )
        return found

    def parts(self, tenant_id: str, message_ids: Collection[int]) -> list[MessagePart]:
        ids = sorted(set(message_ids))
        found: list[MessagePart] = []
        for start in range(0, len(ids), _CHUNK):
            found.extend(
                self.session.scalars(
                    select(MessagePart)
                    .where(
                        MessagePart.tenant_id == tenant_id,
                        MessagePart.message_id.in_(ids[start : start + _CHUNK]),
                    )
                    .order_by(MessagePart.message_id, MessagePart.ordinal)
                )
            )
        return found

    def large_file(self, tenant_id: str, file_id: str) -> LargeFile | None:
        return self.session.scalar(
            select(LargeFile).where(LargeFile.tenant_id == tenant_id, LargeFile.id == file_id)
        )

    def file_spans(self, tenant_id: str, file_id: str) -> list[SecretSpan]:
        return list(
            self.session.scalars(
                select(SecretSpan).where(
                    SecretSpan.tenant_id == tenant_id, SecretSpan.file_id == file_id
                )
            )
        )

    def uris_in_use(self, tenant_id: str, uris: Collection[str]) -> set[str]:
        """Which of ``uris`` a file row of the tenant names (objects are stored per tenant)."""
        return set(
            self.session.scalars(
                select(LargeFile.storage_uri).where(
                    LargeFile.tenant_id == tenant_id, LargeFile.storage_uri.in_(sorted(uris))
                )
            )
        )

    def set_item_tokens(self, conversation_id: int, message_id: int, tokens: int) -> None:
        self.session.execute(
            update(ContextItem)
            .where(
                ContextItem.conversation_id == conversation_id,
                ContextItem.message_id == message_id,
            )
            .values(token_count=tokens)
        )

    def summaries_holding(
        self, tenant_id: str, conversation_id: int, values: Sequence[str]
    ) -> list[Summary]:
        """The conversation's summaries whose content holds one of ``values`` (as stored)."""
        if not values:
            return []
        # LIKE (case-blind for ASCII on SQLite): the caller checks each hit exactly.
        holds: Any = Summary.content.contains(values[0], autoescape=True)
        for value in values[1:]:
            holds = holds | Summary.content.contains(value, autoescape=True)
        return list(
            self.session.scalars(
                select(Summary).where(
                    Summary.tenant_id == tenant_id,
                    Summary.conversation_id == conversation_id,
                    holds,
                )
            )
        )

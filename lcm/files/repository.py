"""All SQL about ``large_files`` rows."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Table, insert, select, update
from sqlalchemy.orm import Session

from lcm.db.models import LargeFile
from lcm.files.extraction import PendingFile

LARGE_FILES: Table = LargeFile.__table__  # type: ignore[assignment]


class LargeFileRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def insert_pending(
        self,
        tenant_id: str,
        conversation_id: int,
        message_ids: Sequence[int],
        pending: Sequence[PendingFile],
    ) -> list[str]:
        """One row per stored payload, linked to the message it was taken from."""
        if not pending:
            return []
        self.session.execute(
            insert(LARGE_FILES),
            [
                {
                    "id": p.file_id,
                    "tenant_id": tenant_id,
                    "conversation_id": conversation_id,
                    "message_id": message_ids[p.message_index],
                    "name": p.name,
                    "mime": p.mime,
                    "ext": p.ext,
                    "byte_size": p.byte_size,
                    "token_count": p.token_count,
                    "sha256": p.sha256,
                    "storage_uri": p.storage_uri,
                }
                for p in pending
            ],
        )
        return [p.file_id for p in pending]

    def get(self, file_id: str, tenant_id: str | None = None) -> LargeFile | None:
        """A file row; with ``tenant_id``, only that tenant's (others look absent)."""
        stmt = select(LargeFile).where(LargeFile.id == file_id)
        if tenant_id is not None:
            stmt = stmt.where(LargeFile.tenant_id == tenant_id)
        return self.session.scalar(stmt)

    def set_summary_if_missing(self, file_id: str, summary: str) -> bool:
        """Write the exploration summary unless one exists (a duplicate job is a no-op)."""
        result = self.session.execute(
            update(LargeFile)
            .where(LargeFile.id == file_id, LargeFile.exploration_summary.is_(None))
            .values(exploration_summary=summary)
        )
        return bool(getattr(result, "rowcount", 0))

    def missing_summaries(self, created_before: datetime, limit: int) -> list[str]:
        """Files still without an exploration summary, oldest first (for a reconciler).

        ``created_before`` leaves out files whose first job may still be queued.
        """
        return list(
            self.session.scalars(
                select(LargeFile.id)
                .where(
                    LargeFile.exploration_summary.is_(None),
                    LargeFile.created_at < created_before,
                )
                .order_by(LargeFile.created_at)
                .limit(limit)
            )
        )

    def for_conversations(self, conversation_ids: Sequence[int]) -> list[LargeFile]:
        if not conversation_ids:
            return []
        return list(
            self.session.scalars(
                select(LargeFile)
                .where(LargeFile.conversation_id.in_(list(conversation_ids)))
                .order_by(LargeFile.created_at, LargeFile.id)
            )
        )

"""All SQL of secret scans (``secret_scans``, ``secret_scan_marks``) and the findings report."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, func, or_, select, update
from sqlalchemy.orm import Session

from lcm.db.models import Conversation, Message, MessagePart, SecretScanMark, SecretScanRun
from lcm.db.models import SecretSpan as SecretSpanRow

ACTIVE = ("pending", "running")


class SecretScanRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def add(self, run: SecretScanRun) -> SecretScanRun:
        self.session.add(run)
        self.session.flush()
        return run

    def get(self, tenant_id: str, scan_id: int) -> SecretScanRun | None:
        return self.session.scalar(
            select(SecretScanRun).where(
                SecretScanRun.tenant_id == tenant_id, SecretScanRun.id == scan_id
            )
        )

    def by_id(self, scan_id: int) -> SecretScanRun | None:
        """A worker's look-up: the job carries the scan id only."""
        return self.session.get(SecretScanRun, scan_id)

    def active(self, tenant_id: str, scope: str) -> SecretScanRun | None:
        return self.session.scalar(
            select(SecretScanRun).where(
                SecretScanRun.tenant_id == tenant_id, SecretScanRun.active_scope == scope
            )
        )

    def claim(self, scan_id: int, owner: str, now: datetime, expires_at: datetime) -> int | None:
        """Take the scan's lease (free or expired); the new fencing token, or None.

        One conditional UPDATE: of two workers claiming at once, the second
        finds the lease held (Postgres re-checks the condition after the
        first commits; SQLite serializes the writes) and gets nothing.
        """
        token = self.session.execute(
            update(SecretScanRun)
            .where(
                SecretScanRun.id == scan_id,
                SecretScanRun.status.in_(ACTIVE),
                or_(SecretScanRun.lease_expires_at.is_(None), SecretScanRun.lease_expires_at < now),
            )
            .values(
                status="running",
                lease_owner=owner,
                lease_expires_at=expires_at,
                fencing_token=SecretScanRun.fencing_token + 1,
                attempts=SecretScanRun.attempts + 1,
                updated_at=now,
            )
            .returning(SecretScanRun.fencing_token)
        ).scalar()
        return None if token is None else int(token)

    def fenced(self, scan_id: int, token: int) -> SecretScanRun | None:
        """The scan, locked, if ``token`` still holds its lease (else None: a newer claim won)."""
        return self.session.scalar(
            select(SecretScanRun)
            .where(SecretScanRun.id == scan_id, SecretScanRun.fencing_token == token)
            .with_for_update()
        )

    def stale_filter(self, run: SecretScanRun) -> ColumnElement[bool]:
        """Conversations in the scan's scope it has still to do (the cursor's excluded)."""
        mark = select(SecretScanMark.detector_version).where(
            SecretScanMark.tenant_id == run.tenant_id,
            SecretScanMark.conversation_id == Conversation.id,
        )
        clauses = [Conversation.tenant_id == run.tenant_id]
        if run.conversation_id is not None:
            clauses.append(Conversation.id == run.conversation_id)
        if not run.rescan_all:
            clauses.append(or_(~mark.exists(), mark.scalar_subquery() != run.detector_version))
        return and_(*clauses)

    def messages_in_scope(self, run: SecretScanRun) -> int:
        return int(
            self.session.scalar(
                select(func.count(Message.id))
                .join(Conversation, Conversation.id == Message.conversation_id)
                .where(Message.tenant_id == run.tenant_id, self.stale_filter(run))
            )
            or 0
        )

    def next_conversation(self, run: SecretScanRun, after: int) -> int | None:
        return self.session.scalar(
            select(Conversation.id)
            .where(self.stale_filter(run), Conversation.id > after)
            .order_by(Conversation.id)
            .limit(1)
        )

    def has_conversation(self, tenant_id: str, conversation_id: int) -> bool:
        return (
            self.session.scalar(
                select(Conversation.id).where(
                    Conversation.tenant_id == tenant_id, Conversation.id == conversation_id
                )
            )
            is not None
        )

    def lock_conversation(self, tenant_id: str, conversation_id: int) -> bool:
        """The conversation's row lock, the one ingest takes before it numbers secrets."""
        return (
            self.session.scalar(
                select(Conversation.id)
                .where(Conversation.tenant_id == tenant_id, Conversation.id == conversation_id)
                .with_for_update()
            )
            is not None
        )

    def message_batch(
        self, tenant_id: str, conversation_id: int, after: int, limit: int
    ) -> list[int]:
        return list(
            self.session.scalars(
                select(Message.id)
                .where(
                    Message.tenant_id == tenant_id,
                    Message.conversation_id == conversation_id,
                    Message.id > after,
                )
                .order_by(Message.id)
                .limit(limit)
            )
        )

    def parts(self, tenant_id: str, message_ids: Sequence[int]) -> list[Any]:
        """(message_id, ordinal, part_type, text) of the messages' parts, in order."""
        return list(
            self.session.execute(
                select(
                    MessagePart.message_id,
                    MessagePart.ordinal,
                    MessagePart.part_type,
                    MessagePart.text,
                )
                .where(MessagePart.tenant_id == tenant_id, MessagePart.message_id.in_(message_ids))
                .order_by(MessagePart.message_id, MessagePart.ordinal)
            )
        )

    def mark(self, tenant_id: str, conversation_id: int, version: str, now: datetime) -> None:
        found = self.session.get(SecretScanMark, (tenant_id, conversation_id))
        if found is None:
            self.session.add(
                SecretScanMark(
                    tenant_id=tenant_id,
                    conversation_id=conversation_id,
                    detector_version=version,
                    scanned_at=now,
                )
            )
        else:
            found.detector_version = version
            found.scanned_at = now

    def due(self, now: datetime, limit: int) -> list[int]:
        """Active scans no live lease holds: lost wake-ups and crashed workers."""
        return list(
            self.session.scalars(
                select(SecretScanRun.id)
                .where(
                    SecretScanRun.status.in_(ACTIVE),
                    or_(
                        SecretScanRun.lease_expires_at.is_(None),
                        SecretScanRun.lease_expires_at < now,
                    ),
                )
                .order_by(SecretScanRun.id)
                .limit(limit)
            )
        )

    def findings_by_kind(
        self, tenant_id: str, conversation_id: int | None
    ) -> list[tuple[int, str | None, str, int, int]]:
        """(conversation id, session key, kind, spans, distinct values) of the tenant."""
        query = (
            select(
                SecretSpanRow.conversation_id,
                Conversation.session_key,
                SecretSpanRow.kind,
                func.count(SecretSpanRow.id),
                func.count(func.distinct(SecretSpanRow.ordinal)),
            )
            .join(Conversation, Conversation.id == SecretSpanRow.conversation_id)
            .where(SecretSpanRow.tenant_id == tenant_id, Conversation.tenant_id == tenant_id)
            .group_by(SecretSpanRow.conversation_id, Conversation.session_key, SecretSpanRow.kind)
            .order_by(SecretSpanRow.conversation_id, SecretSpanRow.kind)
        )
        if conversation_id is not None:
            query = query.where(SecretSpanRow.conversation_id == conversation_id)
        return [
            (int(c), k, kind, int(n), int(d)) for c, k, kind, n, d in self.session.execute(query)
        ]

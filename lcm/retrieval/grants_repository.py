"""All SQL about expansion grants (the rows ``lcm.retrieval.grants`` works with)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, or_, select, update
from sqlalchemy.orm import Session

from lcm.db.models import ExpansionGrant, LlmUsage


class GrantRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def add(self, grant: ExpansionGrant) -> None:
        self.session.add(grant)
        self.session.flush()

    def get(self, grant_id: str, *, lock: bool = False) -> ExpansionGrant | None:
        stmt = select(ExpansionGrant).where(ExpansionGrant.id == grant_id)
        if lock:
            stmt = stmt.with_for_update()
        return self.session.scalar(stmt)

    def set_used(self, grant_id: str, tokens_used: int) -> None:
        self.session.execute(
            update(ExpansionGrant)
            .where(ExpansionGrant.id == grant_id)
            .values(tokens_used=tokens_used)
        )

    def revoke(self, grant_id: str) -> None:
        self.session.execute(
            update(ExpansionGrant).where(ExpansionGrant.id == grant_id).values(revoked=True)
        )

    def request_of(self, grant_id: str) -> tuple[str, dict[str, Any]] | None:
        """The grant's tenant and stored request; None when gone or already cleared."""
        row = self.session.execute(
            select(ExpansionGrant.tenant_id, ExpansionGrant.request).where(
                ExpansionGrant.id == grant_id
            )
        ).first()
        if row is None or row.request is None:
            return None
        return row.tenant_id, row.request

    def set_answer(self, grant_id: str, answer: dict[str, Any]) -> None:
        self.session.execute(
            update(ExpansionGrant).where(ExpansionGrant.id == grant_id).values(answer=answer)
        )

    def take_answer(self, grant_id: str) -> dict[str, Any] | None:
        """The stored answer, clearing it and the request (read once, then not kept)."""
        answer = self.session.scalar(
            select(ExpansionGrant.answer).where(ExpansionGrant.id == grant_id)
        )
        self.clear_texts(grant_id)
        return answer

    def clear_texts(self, grant_id: str) -> None:
        self.session.execute(
            update(ExpansionGrant)
            .where(ExpansionGrant.id == grant_id)
            .values(request=None, answer=None)
        )

    def revoke_expired(self, now: datetime) -> int:
        result = self.session.execute(
            update(ExpansionGrant)
            .where(ExpansionGrant.expires_at <= now, ExpansionGrant.revoked.is_(False))
            .values(revoked=True)
        )
        return int(getattr(result, "rowcount", 0) or 0)

    def delete_ended_before(self, cutoff: datetime) -> int:
        """Delete grants that expired, or were created and revoked, before ``cutoff``.

        A grant expires after it is created (``issue_grant``: a positive
        lifetime), so both kinds were created before ``cutoff``: the delete
        finds them by ``created_at``, an index range, and checks the rest on
        those rows only.
        """
        result = self.session.execute(
            delete(ExpansionGrant).where(
                ExpansionGrant.created_at < cutoff,
                or_(ExpansionGrant.expires_at < cutoff, ExpansionGrant.revoked.is_(True)),
            )
        )
        return int(getattr(result, "rowcount", 0) or 0)

    def record_usage(self, rows: Sequence[LlmUsage]) -> None:
        self.session.add_all(rows)

"""All SQL about expansion leases (the rows ``lcm.retrieval.expansion_lease`` works with)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from lcm.db.models import ExpansionLease


class LeaseRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def take(
        self, tenant_id: str, caller_session: str, owner: str, expires_at: datetime, now: datetime
    ) -> bool:
        """Insert the lease, or take over an expired one; False while another holds it.

        One statement on both databases: on a conflict the row is locked and
        replaced only when its expiry has passed. A concurrent taker on
        Postgres waits for the first transaction and then sees its committed
        row (so it gets nothing back); SQLite runs the two one after the other.
        """
        lease = ExpansionLease.__table__
        dialect = postgresql if self.session.get_bind().dialect.name == "postgresql" else sqlite
        stmt = dialect.insert(lease).values(
            tenant_id=tenant_id, session=caller_session, owner=owner, expires_at=expires_at
        )
        stmt = stmt.on_conflict_do_update(
            index_elements=[lease.c.tenant_id, lease.c.session],
            set_={"owner": stmt.excluded.owner, "expires_at": stmt.excluded.expires_at},
            where=lease.c.expires_at <= now,
        ).returning(lease.c.owner)
        return self.session.execute(stmt).scalar() == owner

    def release(self, tenant_id: str, caller_session: str, owner: str) -> None:
        """Delete the lease if ``owner`` still holds it (never a later holder's)."""
        self.session.execute(
            delete(ExpansionLease).where(
                ExpansionLease.tenant_id == tenant_id,
                ExpansionLease.session == caller_session,
                ExpansionLease.owner == owner,
            )
        )

    def delete_expired(self, now: datetime) -> int:
        result = self.session.execute(
            delete(ExpansionLease).where(ExpansionLease.expires_at <= now)
        )
        return int(getattr(result, "rowcount", 0) or 0)

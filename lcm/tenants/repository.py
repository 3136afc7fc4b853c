"""All SQL about tenants and their API keys."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from lcm.db.models import ApiKey, Tenant


class TenantRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, tenant_id: str) -> Tenant | None:
        return self.session.get(Tenant, tenant_id)

    def find_by_name(self, name: str) -> Tenant | None:
        return self.session.scalar(select(Tenant).where(Tenant.name == name))

    def add(self, tenant: Tenant) -> Tenant:
        self.session.add(tenant)
        self.session.flush()
        return tenant

    def with_active_key_counts(self) -> list[tuple[Tenant, int]]:
        """Every tenant, oldest first, with how many unrevoked keys it holds."""
        active = (
            select(func.count())
            .where(ApiKey.tenant_id == Tenant.id, ApiKey.revoked_at.is_(None))
            .scalar_subquery()
        )
        rows = self.session.execute(select(Tenant, active).order_by(Tenant.created_at, Tenant.id))
        return [(tenant, int(count)) for tenant, count in rows]

    def add_key(self, key: ApiKey) -> ApiKey:
        self.session.add(key)
        self.session.flush()
        return key

    def get_key(self, tenant_id: str, key_id: int) -> ApiKey | None:
        return self.session.scalar(
            select(ApiKey).where(ApiKey.id == key_id, ApiKey.tenant_id == tenant_id)
        )

    def keys_of(self, tenant_id: str) -> Sequence[ApiKey]:
        return self.session.scalars(
            select(ApiKey).where(ApiKey.tenant_id == tenant_id).order_by(ApiKey.id)
        ).all()

    def revoke_key(self, tenant_id: str, key_id: int, now: datetime) -> bool:
        """Revoke an unrevoked key; False when it was already revoked (or is not the tenant's).

        One conditional UPDATE: on Postgres a concurrent revocation of the same
        row waits for this one's row lock, then re-checks ``revoked_at`` and
        matches nothing, so exactly one caller sees True.
        """
        revoked = self.session.execute(
            update(ApiKey)
            .where(ApiKey.id == key_id, ApiKey.tenant_id == tenant_id, ApiKey.revoked_at.is_(None))
            .values(revoked_at=now)
            .returning(ApiKey.id)
        ).one_or_none()
        return revoked is not None

    def active_key_by_hash(self, key_hash: str) -> ApiKey | None:
        return self.session.scalar(
            select(ApiKey).where(ApiKey.key_hash == key_hash, ApiKey.revoked_at.is_(None))
        )

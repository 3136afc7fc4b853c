"""All SQL about tenants and their API keys."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from lcm.db.models import ApiKey, Tenant


class TenantRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, tenant_id: str) -> Tenant | None:
        return self.session.get(Tenant, tenant_id)

    def find_by_name(self, name: str) -> Tenant | None:
        return self.session.scalar(select(Tenant).where(Tenant.name == name))

    def all_ids(self) -> list[str]:
        return list(self.session.scalars(select(Tenant.id).order_by(Tenant.id)))

    def add(self, tenant: Tenant) -> Tenant:
        self.session.add(tenant)
        self.session.flush()
        return tenant

    def add_key(self, key: ApiKey) -> ApiKey:
        self.session.add(key)
        self.session.flush()
        return key

    def tenant_id_for_key_hash(self, key_hash: str) -> str | None:
        return self.session.scalar(
            select(ApiKey.tenant_id).where(ApiKey.key_hash == key_hash, ApiKey.revoked_at.is_(None))
        )

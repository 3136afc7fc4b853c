"""All SQL about tenants and their API keys."""

from __future__ import annotations

from sqlalchemy import select, update
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

    def add_key(self, key: ApiKey) -> ApiKey:
        self.session.add(key)
        self.session.flush()
        return key

    def tenant_id_for_key_hash(self, key_hash: str) -> str | None:
        return self.session.scalar(
            select(ApiKey.tenant_id).where(ApiKey.key_hash == key_hash, ApiKey.revoked_at.is_(None))
        )

    def charge_storage(
        self,
        tenant_id: str,
        messages: int,
        file_bytes: int,
        *,
        max_messages: int | None,
        max_file_bytes: int | None,
    ) -> bool:
        """Add to the tenant's stored counters unless that would pass a cap; True if added.

        One conditional ``UPDATE``: it takes the tenant row's write lock (held
        until the caller's transaction ends; on SQLite the database write lock),
        so concurrent charges of one tenant are serialized and each sees the
        counts the previous one committed. A cap is therefore never passed.
        """
        stmt = (
            update(Tenant)
            .where(Tenant.id == tenant_id)
            .values(
                stored_messages=Tenant.stored_messages + messages,
                stored_file_bytes=Tenant.stored_file_bytes + file_bytes,
            )
        )
        if max_messages is not None:
            stmt = stmt.where(Tenant.stored_messages + messages <= max_messages)
        if max_file_bytes is not None:
            stmt = stmt.where(Tenant.stored_file_bytes + file_bytes <= max_file_bytes)
        result = self.session.execute(stmt)
        return bool(getattr(result, "rowcount", 0))

    def stored(self, tenant_id: str) -> tuple[int, int]:
        """(stored messages, stored large-file bytes) of the tenant."""
        row = self.session.execute(
            select(Tenant.stored_messages, Tenant.stored_file_bytes).where(Tenant.id == tenant_id)
        ).one()
        return int(row[0]), int(row[1])

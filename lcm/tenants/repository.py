"""All SQL about tenants and their API keys."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import BigInteger, bindparam, case, func, select, update
from sqlalchemy.orm import Session

from lcm.db.driver import DriverStatement
from lcm.db.models import ApiKey, Tenant


class ActiveKey(NamedTuple):
    """An unrevoked key as a request needs it: who, which key, what it may do."""

    tenant_id: str
    key_id: int
    scopes: str
    settings_overrides: dict[str, Any]  # the tenant's, read with the key


class TenantRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, tenant_id: str) -> Tenant | None:
        return self.session.get(Tenant, tenant_id)

    def find_by_name(self, name: str) -> Tenant | None:
        return self.session.scalar(select(Tenant).where(Tenant.name == name))

    def all_ids(self) -> list[str]:
        return list(self.session.scalars(select(Tenant.id).order_by(Tenant.id)))

    def all_overrides(self) -> list[tuple[str, dict[str, Any]]]:
        """Every tenant's id with its stored settings overrides, in one statement."""
        rows = self.session.execute(
            select(Tenant.id, Tenant.settings_overrides).order_by(Tenant.id)
        )
        return [(tenant_id, overrides) for tenant_id, overrides in rows]

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

    def active_key_with_tenant(self, key_hash: str) -> ActiveKey | None:
        """The unrevoked key with this hash and its tenant's overrides, in one query.

        Every request runs it: a statement built once, plain columns off the
        session's connection (no ORM entities to build and track).
        """
        row = _ACTIVE_KEY_WITH_TENANT.run(self.session, {"key_hash": key_hash}).first()
        return None if row is None else ActiveKey(row[0], row[1], row[2], dict(row[3] or {}))

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
        statement = _CHARGE_STORAGE[(max_messages is not None, max_file_bytes is not None)]
        result = statement.run(
            self.session,
            {
                "tenant": tenant_id,
                "messages": messages,
                "file_bytes": file_bytes,
                "max_messages": max_messages,
                "max_file_bytes": max_file_bytes,
            },
        )
        return bool(result.rowcount)

    def release_storage(self, tenant_id: str, messages: int, file_bytes: int) -> None:
        """Take erased messages and file bytes off the tenant's counters (never below 0)."""
        self.session.execute(
            update(Tenant)
            .where(Tenant.id == tenant_id)
            .values(
                stored_messages=case(
                    (Tenant.stored_messages > messages, Tenant.stored_messages - messages),
                    else_=0,
                ),
                stored_file_bytes=case(
                    (Tenant.stored_file_bytes > file_bytes, Tenant.stored_file_bytes - file_bytes),
                    else_=0,
                ),
            )
        )

    def any_tenant(self) -> bool:
        return self.session.scalar(select(Tenant.id).limit(1)) is not None

    def stored(self, tenant_id: str) -> tuple[int, int]:
        """(stored messages, stored large-file bytes) of the tenant."""
        row = self.session.execute(
            select(Tenant.stored_messages, Tenant.stored_file_bytes).where(Tenant.id == tenant_id)
        ).one()
        return int(row[0]), int(row[1])


_ACTIVE_KEY_WITH_TENANT = DriverStatement(
    select(ApiKey.tenant_id, ApiKey.id, ApiKey.scopes, Tenant.settings_overrides)
    .join(Tenant, Tenant.id == ApiKey.tenant_id)
    .where(ApiKey.key_hash == bindparam("key_hash"), ApiKey.revoked_at.is_(None))
)


def _charge(capped_messages: bool, capped_bytes: bool) -> DriverStatement:
    """The charge of one batch: the caps it checks are in its WHERE clause."""
    messages = bindparam("messages", type_=BigInteger)
    file_bytes = bindparam("file_bytes", type_=BigInteger)
    statement = (
        update(Tenant)
        .where(Tenant.id == bindparam("tenant"))
        .values(
            stored_messages=Tenant.stored_messages + messages,
            stored_file_bytes=Tenant.stored_file_bytes + file_bytes,
        )
    )
    if capped_messages:
        statement = statement.where(
            Tenant.stored_messages + messages <= bindparam("max_messages", type_=BigInteger)
        )
    if capped_bytes:
        statement = statement.where(
            Tenant.stored_file_bytes + file_bytes <= bindparam("max_file_bytes", type_=BigInteger)
        )
    return DriverStatement(statement)


# Every ingest charges its batch: the statements are built once, one per
# combination of caps, like the key lookup above (building one per call
# costs more CPU than running it).
_CHARGE_STORAGE = {
    (messages, file_bytes): _charge(messages, file_bytes)
    for messages in (False, True)
    for file_bytes in (False, True)
}

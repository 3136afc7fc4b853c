"""Per-tenant storage quotas: stored messages and large-file bytes.

Ingest charges every batch to the tenant's counters (``tenants.stored_messages``,
``tenants.stored_file_bytes``) in the batch's own transaction, with one
conditional ``UPDATE`` that refuses to pass a cap. What that guarantees:

* a batch that would pass a quota is refused whole: the refusal raises, the
  caller's transaction rolls back, and none of its messages, parts, context
  items or file rows are written;
* no overshoot under concurrency: the ``UPDATE`` holds the tenant row's lock
  until the batch commits, so concurrent batches of one tenant are charged one
  after another, each against the counts the previous one committed. It runs
  last in the ingest, so the lock is held only for the rest of that
  transaction (the commit, or the turn's threshold check), not its inserts.

Counting is a read of two columns, never a ``count(*)`` over messages.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from lcm.errors import FileQuotaExceeded, MessageQuotaExceeded
from lcm.settings import TenantLimits
from lcm.tenants.repository import TenantRepository


@dataclass(frozen=True, slots=True)
class StorageQuota:
    """The caps of one tenant (None: unlimited)."""

    max_messages: int | None = None
    max_file_bytes: int | None = None

    @classmethod
    def of(cls, limits: TenantLimits) -> StorageQuota:
        """The tenant's effective caps; 0, like None, means unlimited."""
        return cls(limits.max_stored_messages or None, limits.max_file_bytes or None)


UNLIMITED = StorageQuota()


def charge_storage(
    session: Session, tenant_id: str, messages: int, file_bytes: int, quota: StorageQuota
) -> None:
    """Count a batch against the tenant's quota; raise (and write nothing) if it would pass it."""
    repo = TenantRepository(session)
    if repo.charge_storage(
        tenant_id,
        messages,
        file_bytes,
        max_messages=quota.max_messages,
        max_file_bytes=quota.max_file_bytes,
    ):
        return
    stored_messages, stored_bytes = repo.stored(tenant_id)
    if quota.max_messages is not None and stored_messages + messages > quota.max_messages:
        raise MessageQuotaExceeded(
            f"storing {messages} more messages would pass the tenant's quota of "
            f"{quota.max_messages} (stored: {stored_messages}); nothing was written"
        )
    raise FileQuotaExceeded(
        f"storing {file_bytes} more large-file bytes would pass the tenant's quota of "
        f"{quota.max_file_bytes} bytes (stored: {stored_bytes}); nothing was written"
    )

"""Tenants, their API keys, and conversations (a session family shares a ``session_key``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Index,
    String,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from lcm.db.models.base import Base, BigId, Json, UtcDateTime, tenant_fk, utcnow

ALL_SCOPES = "ingest,read,admin"
NEVER_CLAIMED = datetime(1970, 1, 1, tzinfo=UTC)
HOST_CURSOR_MAX = 8192  # characters of a host's transcript cursor (as api.contract bounds it)


class Tenant(Base):
    __tablename__ = "tenants"
    __table_args__ = (
        # The fair queue's order over the tenants that owe compaction: a
        # wake-up walks it from the start (lcm/compaction/fairness_repository.py).
        Index(
            "ix_tenants_compaction_due",
            "compaction_claimed_at",
            "id",
            postgresql_where=text("compaction_due"),
            sqlite_where=text("compaction_due"),
        ),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    # Per-tenant overrides (a subset of TenantSettings fields).
    settings_overrides: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    # What the tenant stores, kept by ingest in the same transaction as the rows
    # (quotas read these instead of counting). Erasing data must subtract.
    stored_messages: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    stored_file_bytes: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    # When a compaction wake-up last claimed this tenant's debt: the fair
    # queue serves the tenant that waited longest first (lcm/compaction/fairness_repository.py).
    # Never claimed: the epoch, so a new tenant comes first in that order
    # (an index's order, which a null would break: nulls sort last there).
    compaction_claimed_at: Mapped[datetime | None] = mapped_column(
        UtcDateTime, default=NEVER_CLAIMED
    )
    # Set while the tenant may owe compaction: in the transaction that makes
    # any of its debt pending (from no row, done or failed), and cleared by
    # beat's reconciler once it has neither pending nor running debt. The fair
    # queue looks only among these tenants (lcm/compaction/fairness_repository.py).
    compaction_due: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class ApiKey(Base):
    """A tenant's API key. Only the SHA-256 of the key is stored."""

    __tablename__ = "api_keys"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant_id: Mapped[str] = tenant_fk()
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    name: Mapped[str] = mapped_column(String(200), default="default")
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    # What the key may do: a comma list of ``ingest``, ``read``, ``admin``
    # (``lcm.tenants.keys``). Keys from before scopes existed hold all three.
    scopes: Mapped[str] = mapped_column(String(100), default=ALL_SCOPES, server_default=ALL_SCOPES)


class Conversation(Base):
    """One runtime session of a session family (same ``session_key``)."""

    __tablename__ = "conversations"
    __table_args__ = (
        UniqueConstraint("tenant_id", "session_key", "session_id"),
        # At most one live (unarchived) conversation per session family.
        Index(
            "uq_conversations_active_family",
            "tenant_id",
            "session_key",
            unique=True,
            postgresql_where=text("archived_at IS NULL"),
            sqlite_where=text("archived_at IS NULL"),
        ),
        # Listing by recent activity and the retention sweep's "idle since".
        Index("ix_conversations_tenant_updated", "tenant_id", "updated_at"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant_id: Mapped[str] = tenant_fk(index=False)  # ix_conversations_tenant_updated leads with it
    session_key: Mapped[str] = mapped_column(String(512))
    session_id: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    archived_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    # Last time messages were written to it (server clock: a message's own
    # created_at may be an old transcript's). Retention reads idleness from it.
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    # Bumped by every change of context_items: passes commit only if unchanged.
    context_version: Mapped[int] = mapped_column(BigInteger, default=0)
    # Bumped with context_version, in the same statement, by ingest alone:
    # its new items go after every other. While ``context_version -
    # context_appends`` stands, only appends changed the context, so a
    # process's cached window grows instead of being read again
    # (lcm/window_cache.py).
    context_appends: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    # Highest seq handed out; the row lock on it serializes concurrent ingest.
    last_seq: Mapped[int] = mapped_column(BigInteger, default=0)
    # Highest context_items ordinal handed out (ordinals only ever grow).
    last_ordinal: Mapped[int] = mapped_column(BigInteger, default=0)
    bootstrap_checkpoint: Mapped[dict[str, Any] | None] = mapped_column(Json)
    # The model and context window the latest turn named: the worker's sweep
    # applies the same ``model_overrides`` rule as the turn did.
    model_id: Mapped[str | None] = mapped_column(String(200))
    context_window: Mapped[int | None] = mapped_column(BigInteger)
    # The host's opaque transcript cursor after the last entry imported (an
    # OpenClaw plugin's): stored with the batch that brought the entries, so
    # after a gateway restart the host sends only what follows it. Deferred,
    # and raising if touched unloaded: the rows loaded whole (listing pages,
    # status) should not carry up to 8 KB each for it; its own statements in
    # ConversationRepository read and write it.
    host_cursor: Mapped[str | None] = mapped_column(
        String(HOST_CURSOR_MAX), deferred=True, deferred_raiseload=True
    )

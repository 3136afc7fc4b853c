"""SQLAlchemy 2 typed models for the whole data model of DESIGN §2.

Every row carries ``tenant_id``. There are no ORM relationships: every load
is an explicit query in a repository, so no lazy N+1 query hides on the hot
path. Schema changes go
through Alembic (``lcm/db/migrations``); these classes are the source the
migrations are written against.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Protocol

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_N_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# SQLite only auto-increments INTEGER PRIMARY KEY; Postgres gets a real bigint.
BigId = BigInteger().with_variant(Integer(), "sqlite")
Json = JSON().with_variant(JSONB(), "postgresql")


def utcnow() -> datetime:
    return datetime.now(UTC)


class UtcDateTime(TypeDecorator[datetime]):
    """A timestamp that is always timezone-aware UTC in Python.

    SQLite has no time zone type and hands back naive values; Postgres stores
    ``timestamptz``. This makes both look the same to the domain.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


def _tenant_fk() -> Mapped[str]:
    return mapped_column(String(40), ForeignKey("tenants.id", ondelete="CASCADE"), index=True)


def _conversation_fk() -> Mapped[int]:
    return mapped_column(BigId, ForeignKey("conversations.id", ondelete="CASCADE"))


class Tenant(Base):
    __tablename__ = "tenants"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    # Per-tenant compaction overrides (a subset of CompactionSettings fields).
    settings_overrides: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class ApiKey(Base):
    """A tenant's API key. Only the SHA-256 of the key is stored."""

    __tablename__ = "api_keys"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant_id: Mapped[str] = _tenant_fk()
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    name: Mapped[str] = mapped_column(String(200), default="default")
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(UtcDateTime)


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
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant_id: Mapped[str] = _tenant_fk()
    session_key: Mapped[str] = mapped_column(String(512))
    session_id: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    archived_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    # Bumped by every change of context_items: passes commit only if unchanged.
    context_version: Mapped[int] = mapped_column(BigInteger, default=0)
    # Highest seq handed out; the row lock on it serializes concurrent ingest.
    last_seq: Mapped[int] = mapped_column(BigInteger, default=0)
    # Highest context_items ordinal handed out (ordinals only ever grow).
    last_ordinal: Mapped[int] = mapped_column(BigInteger, default=0)
    bootstrap_checkpoint: Mapped[dict[str, Any] | None] = mapped_column(Json)


class Message(Base):
    __tablename__ = "messages"
    __table_args__ = (
        UniqueConstraint("conversation_id", "seq"),
        UniqueConstraint("conversation_id", "client_id"),
        Index("ix_messages_tenant_created", "tenant_id", "created_at"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant_id: Mapped[str] = mapped_column(String(40), ForeignKey("tenants.id", ondelete="CASCADE"))
    conversation_id: Mapped[int] = _conversation_fk()
    seq: Mapped[int] = mapped_column(BigInteger)
    role: Mapped[str] = mapped_column(String(16))
    content: Mapped[str] = mapped_column(Text)
    # "text" when the gateway sent a plain string, "blocks" for a list of blocks.
    content_shape: Mapped[str] = mapped_column(String(8), default="text")
    token_count: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    client_id: Mapped[str | None] = mapped_column(String(200))


class MessagePart(Base):
    """One structured block of a message, in order, stored as sent."""

    __tablename__ = "message_parts"
    __table_args__ = (UniqueConstraint("message_id", "ordinal"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant_id: Mapped[str] = mapped_column(String(40), ForeignKey("tenants.id", ondelete="CASCADE"))
    message_id: Mapped[int] = mapped_column(BigId, ForeignKey("messages.id", ondelete="CASCADE"))
    ordinal: Mapped[int] = mapped_column(Integer)
    part_type: Mapped[str] = mapped_column(String(32))
    text: Mapped[str] = mapped_column(Text, default="")
    # tool_use id, or the tool_use_id a tool_result answers: pairs tool calls.
    tool_call_id: Mapped[str | None] = mapped_column(String(200))
    payload: Mapped[dict[str, Any]] = mapped_column(Json)


class Summary(Base):
    __tablename__ = "summaries"
    __table_args__ = (Index("ix_summaries_conversation_depth", "conversation_id", "depth"),)

    id: Mapped[str] = mapped_column(String(24), primary_key=True)  # sum_ + 16 hex
    tenant_id: Mapped[str] = _tenant_fk()
    conversation_id: Mapped[int] = _conversation_fk()
    kind: Mapped[str] = mapped_column(String(16))  # leaf | condensed
    depth: Mapped[int] = mapped_column(Integer)
    content: Mapped[str] = mapped_column(Text)
    token_count: Mapped[int] = mapped_column(Integer)
    source_token_count: Mapped[int] = mapped_column(Integer, default=0)
    earliest_at: Mapped[datetime] = mapped_column(UtcDateTime)
    latest_at: Mapped[datetime] = mapped_column(UtcDateTime)
    descendant_count: Mapped[int] = mapped_column(Integer)
    file_ids: Mapped[list[str]] = mapped_column(Json, default=list)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    escalation: Mapped[str] = mapped_column(String(16))  # normal | aggressive | fallback
    model: Mapped[str] = mapped_column(String(100))


class SummaryMessage(Base):
    """Leaf summary → the raw messages it was made from, in order."""

    __tablename__ = "summary_messages"

    summary_id: Mapped[str] = mapped_column(
        String(24), ForeignKey("summaries.id", ondelete="CASCADE"), primary_key=True
    )
    message_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("messages.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    tenant_id: Mapped[str] = mapped_column(String(40), ForeignKey("tenants.id", ondelete="CASCADE"))
    ordinal: Mapped[int] = mapped_column(Integer)


class SummaryParent(Base):
    """Condensed summary → the source summaries it was made from, in order."""

    __tablename__ = "summary_parents"

    summary_id: Mapped[str] = mapped_column(
        String(24), ForeignKey("summaries.id", ondelete="CASCADE"), primary_key=True
    )
    parent_id: Mapped[str] = mapped_column(
        String(24), ForeignKey("summaries.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    tenant_id: Mapped[str] = mapped_column(String(40), ForeignKey("tenants.id", ondelete="CASCADE"))
    ordinal: Mapped[int] = mapped_column(Integer)


class ContextItem(Base):
    """What the model sees, in ``ordinal`` order: a message ref or a summary ref.

    Ordinals only grow and may have gaps: a compaction deletes a range and puts
    one summary item at the range's first ordinal, so no other row moves.
    """

    __tablename__ = "context_items"
    __table_args__ = (UniqueConstraint("conversation_id", "ordinal"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant_id: Mapped[str] = mapped_column(String(40), ForeignKey("tenants.id", ondelete="CASCADE"))
    conversation_id: Mapped[int] = _conversation_fk()
    ordinal: Mapped[int] = mapped_column(BigInteger)
    item_type: Mapped[str] = mapped_column(String(8))  # message | summary
    message_id: Mapped[int | None] = mapped_column(
        BigId, ForeignKey("messages.id", ondelete="CASCADE")
    )
    summary_id: Mapped[str | None] = mapped_column(
        String(24), ForeignKey("summaries.id", ondelete="CASCADE")
    )
    token_count: Mapped[int] = mapped_column(Integer)


class LargeFile(Base):
    __tablename__ = "large_files"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)  # file_ + hex
    tenant_id: Mapped[str] = _tenant_fk()
    conversation_id: Mapped[int] = _conversation_fk()
    message_id: Mapped[int | None] = mapped_column(
        BigId, ForeignKey("messages.id", ondelete="SET NULL")
    )
    name: Mapped[str | None] = mapped_column(String(500))
    mime: Mapped[str | None] = mapped_column(String(200))
    ext: Mapped[str | None] = mapped_column(String(32))
    byte_size: Mapped[int] = mapped_column(BigInteger)
    token_count: Mapped[int] = mapped_column(Integer)
    sha256: Mapped[str] = mapped_column(String(64))
    storage_uri: Mapped[str] = mapped_column(Text)
    exploration_summary: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class CompactionDebt(Base):
    """At most one row per conversation: the durable truth that work is owed.

    The Redis message is only a wake-up; this row is the lock (lease owner and
    expiry) and the fence (``fencing_token`` bumps on every claim).
    """

    __tablename__ = "compaction_debt"

    conversation_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("conversations.id", ondelete="CASCADE"), primary_key=True
    )
    tenant_id: Mapped[str] = _tenant_fk()
    reason: Mapped[str] = mapped_column(String(16))  # threshold | manual | overflow | large_file
    status: Mapped[str] = mapped_column(String(16), index=True)  # pending|running|done|failed
    token_budget: Mapped[int | None] = mapped_column(Integer)
    target_tokens: Mapped[int | None] = mapped_column(Integer)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    lease_owner: Mapped[str | None] = mapped_column(String(200))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    fencing_token: Mapped[int] = mapped_column(BigInteger, default=0)
    # Set when new debt arrives while a sweep runs: one follow-up, coalesced.
    rearmed: Mapped[bool] = mapped_column(Boolean, default=False)
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    enqueued_at: Mapped[datetime | None] = mapped_column(UtcDateTime)


class CompactionRun(Base):
    """One compaction pass, successful or not: the history behind status and metrics."""

    __tablename__ = "compaction_runs"
    __table_args__ = (Index("ix_compaction_runs_conversation", "conversation_id", "id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant_id: Mapped[str] = _tenant_fk()
    conversation_id: Mapped[int] = _conversation_fk()
    summary_id: Mapped[str | None] = mapped_column(String(24))
    kind: Mapped[str] = mapped_column(String(16))  # leaf | condensed
    depth: Mapped[int] = mapped_column(Integer)
    tokens_in: Mapped[int] = mapped_column(Integer, default=0)
    tokens_out: Mapped[int] = mapped_column(Integer, default=0)
    duration_ms: Mapped[int] = mapped_column(Integer, default=0)
    escalation: Mapped[str | None] = mapped_column(String(16))
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class UsageCall(Protocol):
    """One LLM call's cost, as the summarizer and the expansion loop report it."""

    @property
    def model(self) -> str: ...

    @property
    def input_tokens(self) -> int: ...

    @property
    def output_tokens(self) -> int: ...


class LlmUsage(Base):
    __tablename__ = "llm_usage"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant_id: Mapped[str] = _tenant_fk()
    conversation_id: Mapped[int | None] = mapped_column(
        BigId, ForeignKey("conversations.id", ondelete="SET NULL")
    )
    model: Mapped[str] = mapped_column(String(100))
    purpose: Mapped[str] = mapped_column(String(32))  # summary | expansion | file
    input_tokens: Mapped[int] = mapped_column(Integer)
    output_tokens: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)

    @classmethod
    def from_calls(
        cls, tenant_id: str, conversation_id: int | None, purpose: str, calls: Iterable[UsageCall]
    ) -> list[LlmUsage]:
        """One row per call: what cost reporting sums by tenant and model."""
        return [
            cls(
                tenant_id=tenant_id,
                conversation_id=conversation_id,
                model=c.model,
                purpose=purpose,
                input_tokens=c.input_tokens,
                output_tokens=c.output_tokens,
            )
            for c in calls
        ]


class ExpansionGrant(Base):
    """A scoped, expiring, revocable licence for an expand-query loop to read."""

    __tablename__ = "expansion_grants"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    tenant_id: Mapped[str] = _tenant_fk()
    conversation_ids: Mapped[list[int]] = mapped_column(Json)
    token_cap: Mapped[int] = mapped_column(Integer)
    tokens_used: Mapped[int] = mapped_column(Integer, default=0)
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime)
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class TurnCommit(Base):
    """One accepted host turn, keyed by the host's advancement key (exactly once).

    The unique key is what makes a host's retry of ``commitTurn`` a no-op: the
    turn's messages and this row are written in one transaction, so either both
    exist or neither does.
    """

    __tablename__ = "turn_commits"
    __table_args__ = (UniqueConstraint("conversation_id", "advancement_key"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant_id: Mapped[str] = _tenant_fk()
    conversation_id: Mapped[int] = _conversation_fk()
    advancement_key: Mapped[str] = mapped_column(String(512))
    message_count: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class ConversationFork(Base):
    """A child conversation prepared from a parent's context (a subagent).

    ``mode`` is ``fork`` (the child starts with the parent's context: summaries
    by reference, raw messages copied) or ``isolated`` (it starts empty).
    ``status`` is ``active``, ``ended`` or ``rolled_back``.
    """

    __tablename__ = "conversation_forks"

    child_conversation_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("conversations.id", ondelete="CASCADE"), primary_key=True
    )
    tenant_id: Mapped[str] = _tenant_fk()
    parent_conversation_id: Mapped[int] = _conversation_fk()
    mode: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16))
    expires_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    ended_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    end_reason: Mapped[str | None] = mapped_column(String(40))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)

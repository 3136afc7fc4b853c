"""Work about a conversation: compaction debt and runs, LLM usage, expansion grants and leases."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import (
    BigInteger,
    Boolean,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from lcm.db.models.base import Base, BigId, Json, UtcDateTime, conversation_fk, tenant_fk, utcnow


class CompactionDebt(Base):
    """At most one row per conversation: the durable truth that work is owed.

    The Redis message is only a wake-up; this row is the lock (lease owner and
    expiry) and the fence (``fencing_token`` bumps on every claim).
    """

    __tablename__ = "compaction_debt"
    # The fair claim: a tenant's oldest due pending debt, one index probe per tenant.
    __table_args__ = (Index("ix_compaction_debt_fair", "tenant_id", "status", "enqueued_at"),)

    conversation_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("conversations.id", ondelete="CASCADE"), primary_key=True
    )
    tenant_id: Mapped[str] = tenant_fk(index=False)  # ix_compaction_debt_fair leads with it
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
    tenant_id: Mapped[str] = tenant_fk()
    conversation_id: Mapped[int] = conversation_fk()
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
    tenant_id: Mapped[str] = tenant_fk()
    # Usage is billing history: erasing a conversation keeps its rows, unlinked.
    conversation_id: Mapped[int | None] = mapped_column(
        BigId, ForeignKey("conversations.id", ondelete="SET NULL"), index=True
    )
    model: Mapped[str] = mapped_column(String(100))
    purpose: Mapped[str] = mapped_column(String(32))  # summary | expansion | file
    # anthropic | openai | offline; "" for a caller that did not say.
    provider: Mapped[str] = mapped_column(String(32), default="")
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
                provider=getattr(c, "provider", "") or "",
                input_tokens=c.input_tokens,
                output_tokens=c.output_tokens,
            )
            for c in calls
        ]


class HostUsage(Base):
    """What the host's own model call of a turn used, as the host reported it on ``…/turns``.

    Not lcm's cost (that is ``llm_usage``): the gateway's prompt and reply
    tokens, and how much of the prompt its provider's cache read or wrote,
    so an operator sees what the assembled context costs on the host's bill.
    """

    __tablename__ = "host_usage"
    # The usage report reads a tenant's rows since a date.
    __table_args__ = (Index("ix_host_usage_tenant_created", "tenant_id", "created_at"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant_id: Mapped[str] = tenant_fk(index=False)  # the composite index leads with it
    # Billing history, like llm_usage: erasing a conversation unlinks its rows.
    conversation_id: Mapped[int | None] = mapped_column(
        BigId, ForeignKey("conversations.id", ondelete="SET NULL"), index=True
    )
    model: Mapped[str] = mapped_column(String(200))  # "" when the turn named none
    input_tokens: Mapped[int] = mapped_column(BigInteger)
    output_tokens: Mapped[int] = mapped_column(BigInteger)
    cache_read_tokens: Mapped[int] = mapped_column(BigInteger)
    cache_write_tokens: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class ExpansionGrant(Base):
    """A scoped, expiring, revocable licence for an expand-query loop to read."""

    __tablename__ = "expansion_grants"
    # Beat's sweep (``lcm.retrieval.grants.sweep_grants``) finds what it
    # revokes among the live grants only, and what it deletes by age: without
    # these it read the whole table, a day of grants, every few minutes.
    __table_args__ = (
        Index(
            "ix_expansion_grants_live_expiry",
            "expires_at",
            postgresql_where=text("revoked IS false"),
            sqlite_where=text("revoked IS false"),
        ),
        Index("ix_expansion_grants_created_at", "created_at"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    tenant_id: Mapped[str] = tenant_fk()
    conversation_ids: Mapped[list[int]] = mapped_column(Json)
    token_cap: Mapped[int] = mapped_column(Integer)
    tokens_used: Mapped[int] = mapped_column(Integer, default=0)
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime)
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    # The expand-query's request and, once the loop ended, its answer: kept
    # here so the job message carries the grant id only (a broker, Flower and
    # worker logs never see a tenant's text). The API clears both once read.
    request: Mapped[dict[str, Any] | None] = mapped_column(Json, default=None)
    answer: Mapped[dict[str, Any] | None] = mapped_column(Json, default=None)


class ExpansionLease(Base):
    """One running expand-query per caller session: the row is the lock.

    The primary key makes a second holder impossible on either database (a
    concurrent insert waits for, then conflicts with, the first); the expiry
    frees a session whose API process died while waiting, so nothing but time
    is needed to clean up after a crash (``lcm.retrieval.expansion_lease``).
    """

    __tablename__ = "expansion_leases"
    # Beat's grant sweep deletes expired leases (left by API processes that died).
    __table_args__ = (Index("ix_expansion_leases_expires_at", "expires_at"),)

    tenant_id: Mapped[str] = mapped_column(
        String(40), ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True
    )
    # The caller's session: its session key, or ``key:<api key id>`` without one.
    session: Mapped[str] = mapped_column(String(600), primary_key=True)
    owner: Mapped[str] = mapped_column(String(40))  # the grant id of the running call
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime)


class SummaryOperation(Base):
    """An operator's surgery on a summary (rewrite or dissolve): what was asked, how it went.

    Runs as passes of the conversation's compaction chain, under its debt
    row's lease (``lcm/compaction/surgery.py``); this row is what a caller
    polls. ``targets`` are the summaries a rewrite rewrites, bottom-up, and
    ``done`` how many of them are; a dissolve has one target.
    """

    __tablename__ = "summary_operations"
    # The chain's look-up: a conversation's pending operations, oldest first.
    __table_args__ = (
        Index("ix_summary_operations_conversation", "conversation_id", "status", "created_at"),
    )

    id: Mapped[str] = mapped_column(String(24), primary_key=True)  # op_ + 16 hex
    tenant_id: Mapped[str] = tenant_fk()
    conversation_id: Mapped[int] = conversation_fk()
    summary_id: Mapped[str] = mapped_column(String(24))
    action: Mapped[str] = mapped_column(String(16))  # rewrite | dissolve
    subtree: Mapped[bool] = mapped_column(Boolean, default=False)
    instructions: Mapped[str | None] = mapped_column(Text)
    targets: Mapped[list[str]] = mapped_column(Json, default=list)
    done: Mapped[int] = mapped_column(Integer, default=0)
    status: Mapped[str] = mapped_column(String(16))  # pending | done | failed
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime)

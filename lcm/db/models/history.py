"""What a conversation holds: messages and parts, summaries and links, context, large files."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from lcm.db.models.base import (
    Base,
    BigId,
    Json,
    UtcDateTime,
    conversation_fk,
    owned_tenant,
    tenant_fk,
    utcnow,
)


class Message(Base):
    __tablename__ = "messages"
    __table_args__ = (
        UniqueConstraint("conversation_id", "seq"),
        UniqueConstraint("conversation_id", "client_id"),
        Index("ix_messages_tenant_created", "tenant_id", "created_at"),
        # SQLite gives an id once only (migration 0024): views are cached by
        # id (lcm/message_cache.py).
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant_id: Mapped[str] = mapped_column(String(40), ForeignKey("tenants.id", ondelete="CASCADE"))
    conversation_id: Mapped[int] = conversation_fk()
    seq: Mapped[int] = mapped_column(BigInteger)
    role: Mapped[str] = mapped_column(String(16))
    content: Mapped[str] = mapped_column(Text)
    # "text" when the gateway sent a plain string, "blocks" for a list of blocks.
    content_shape: Mapped[str] = mapped_column(String(8), default="text")
    token_count: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    client_id: Mapped[str | None] = mapped_column(String(200))
    # The provider and model that wrote an assistant message (migration 0019):
    # signed thinking is replayed only to that model.
    provider: Mapped[str | None] = mapped_column(String(100))
    model: Mapped[str | None] = mapped_column(String(200))


class MessagePart(Base):
    """One structured block of a message, in order, stored as sent."""

    __tablename__ = "message_parts"
    __table_args__ = (UniqueConstraint("message_id", "ordinal"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant_id: Mapped[str] = owned_tenant()  # its message's (migration 0014)
    message_id: Mapped[int] = mapped_column(BigId, ForeignKey("messages.id", ondelete="CASCADE"))
    ordinal: Mapped[int] = mapped_column(Integer)
    part_type: Mapped[str] = mapped_column(String(32))
    text: Mapped[str] = mapped_column(Text, default="")
    # tool_use id, or the tool_use_id a tool_result answers: pairs tool calls.
    tool_call_id: Mapped[str | None] = mapped_column(String(200))
    payload: Mapped[dict[str, Any]] = mapped_column(Json)


class Summary(Base):
    __tablename__ = "summaries"
    __table_args__ = (
        Index("ix_summaries_conversation_depth", "conversation_id", "depth"),
        # The doctor's listing: a tenant's degraded summaries.
        Index("ix_summaries_degraded", "tenant_id", "degraded"),
    )

    id: Mapped[str] = mapped_column(String(24), primary_key=True)  # sum_ + 16 hex
    tenant_id: Mapped[str] = tenant_fk(index=False)  # ix_summaries_degraded leads with it
    conversation_id: Mapped[int] = conversation_fk()
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
    # Why no LLM wrote it although one is configured: ``llm_error`` (the
    # provider failed: truncation), ``budget`` (the tenant's daily LLM budget
    # was spent: extractive). NULL for a normal summary. ``lcm doctor --apply``
    # re-summarizes these in place once the LLM answers again.
    degraded: Mapped[str | None] = mapped_column(String(16), default=None)
    # An operator's rewrite (``lcm summary rewrite``, lcm/compaction/surgery.py)
    # replaced the content in place: when the last one did, and how many did.
    rewritten_at: Mapped[datetime | None] = mapped_column(UtcDateTime, default=None)
    # No server default in the model: a pass writes every column (pass_statement.py);
    # migration 0021 gave the rows before it a 0.
    rewrites: Mapped[int] = mapped_column(Integer, default=0)
    # The raw messages below it, through every level (what describe reports):
    # how many, and the first and last seq. Written with the summary (a
    # condensed one's is the union of its parents'), backfilled by migration
    # 0030, checked and repaired by the doctor (lcm/compaction/source_ranges.py).
    # NULL count: not known (a writer older than 0030); describe then walks.
    source_message_count: Mapped[int | None] = mapped_column(Integer, default=None)
    source_first_seq: Mapped[int | None] = mapped_column(BigInteger, default=None)
    source_last_seq: Mapped[int | None] = mapped_column(BigInteger, default=None)


class SummaryMessage(Base):
    """Leaf summary → the raw messages it was made from, in order.

    No foreign keys (migration 0012): a link is written only with its
    summary, for messages its pass took out of the context in the same
    statement, and erasure deletes links itself; checked one row at a time,
    the keys were half the time of a leaf pass's write.
    """

    __tablename__ = "summary_messages"

    summary_id: Mapped[str] = mapped_column(String(24), primary_key=True)
    message_id: Mapped[int] = mapped_column(BigId, primary_key=True, index=True)
    tenant_id: Mapped[str] = owned_tenant()  # no foreign key since migration 0011
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
    tenant_id: Mapped[str] = owned_tenant()  # no foreign key since migration 0011
    ordinal: Mapped[int] = mapped_column(Integer)


class ContextItem(Base):
    """What the model sees, in ``ordinal`` order: a message ref or a summary ref.

    Ordinals only grow and may have gaps: a compaction deletes a range and puts
    one summary item at the range's first ordinal, so no other row moves.
    """

    __tablename__ = "context_items"
    __table_args__ = (UniqueConstraint("conversation_id", "ordinal"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant_id: Mapped[str] = owned_tenant()  # its conversation's (migration 0014)
    conversation_id: Mapped[int] = conversation_fk()
    ordinal: Mapped[int] = mapped_column(BigInteger)
    item_type: Mapped[str] = mapped_column(String(8))  # message | summary
    # Indexed: deleting a message or summary looks its context items up by these.
    message_id: Mapped[int | None] = mapped_column(
        BigId, ForeignKey("messages.id", ondelete="CASCADE"), index=True
    )
    summary_id: Mapped[str | None] = mapped_column(
        String(24), ForeignKey("summaries.id", ondelete="CASCADE"), index=True
    )
    token_count: Mapped[int] = mapped_column(Integer)


class LargeFile(Base):
    __tablename__ = "large_files"
    __table_args__ = (
        # An erase asks which of the blobs it released a row of the tenant
        # still names (``ErasureRepository.referenced_uris``); the tenant's
        # own lookups read the leading column.
        Index("ix_large_files_tenant_uri", "tenant_id", "storage_uri"),
        # Beat's file reconciler looks for the few files still without a
        # summary, oldest first: without this it read the whole table.
        Index(
            "ix_large_files_unsummarized",
            "created_at",
            postgresql_where=text("exploration_summary IS NULL"),
            sqlite_where=text("exploration_summary IS NULL"),
        ),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)  # file_ + hex
    tenant_id: Mapped[str] = tenant_fk(index=False)
    conversation_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("conversations.id", ondelete="CASCADE"), index=True
    )
    message_id: Mapped[int | None] = mapped_column(
        BigId, ForeignKey("messages.id", ondelete="SET NULL"), index=True
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

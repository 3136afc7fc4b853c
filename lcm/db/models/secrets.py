"""Where secrets sit in stored text (spans over message parts and large files), and the
scans that rewrite them after a detector or rule change."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from lcm.db.models.base import Base, BigId, Json, UtcDateTime, owned_tenant, tenant_fk, utcnow


class SecretSpan(Base):
    """One detected secret: ``text[char_offset : char_offset + char_length]`` of a part or file.

    The text itself is stored as sent; this row says where to mask it.
    Offsets count code points. ``ordinal`` numbers the distinct secret values
    of a conversation (the ``#3`` of ``[secret:aws_key#3]``); ``fingerprint``
    is a keyed hash of the value (never the value), so the same value gets
    the same ordinal wherever it appears in the conversation.
    """

    __tablename__ = "secret_spans"
    __table_args__ = (
        # Ingest looks up the ordinals of a batch's fingerprints; erasure
        # deletes by conversation (the leading column).
        Index("ix_secret_spans_conversation_fingerprint", "conversation_id", "fingerprint"),
        Index("ix_secret_spans_message_id", "message_id"),
        Index("ix_secret_spans_file_id", "file_id"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant_id: Mapped[str] = owned_tenant()  # its conversation's
    conversation_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("conversations.id", ondelete="CASCADE")
    )
    # A span is in a message part (message_id, part) or in a large file (file_id).
    message_id: Mapped[int | None] = mapped_column(
        BigId, ForeignKey("messages.id", ondelete="CASCADE")
    )
    part: Mapped[int | None] = mapped_column(Integer)
    file_id: Mapped[str | None] = mapped_column(
        String(40), ForeignKey("large_files.id", ondelete="CASCADE")
    )
    char_offset: Mapped[int] = mapped_column(Integer)
    char_length: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(40))
    ordinal: Mapped[int] = mapped_column(Integer)
    fingerprint: Mapped[str] = mapped_column(String(64))
    # Set when an admin erased the value (``lcm.secrets.erasure``): the text
    # now holds the placeholder at this span, so the row keeps its ordinal
    # (numbering stays stable) and never yields an original again.
    erased_at: Mapped[datetime | None] = mapped_column(UtcDateTime, default=None)


class SecretRead(Base):
    """One read that returned originals (``with_secrets``): who, when, where, which spans.

    Kept apart from the conversation (no foreign key): erasing a conversation
    keeps its audit trail; erasing the tenant deletes it. Rows older than
    ``secrets_reads_retention_days`` are pruned as new ones are written.
    """

    __tablename__ = "secret_reads"
    __table_args__ = (
        # The listing pages a tenant's rows newest first; pruning is by age.
        Index("ix_secret_reads_tenant_id_id", "tenant_id", "id"),
        Index("ix_secret_reads_tenant_id_read_at", "tenant_id", "read_at"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant_id: Mapped[str] = tenant_fk(index=False)
    # The key that read (None: the local operator through the CLI).
    key_id: Mapped[int | None] = mapped_column(BigId)
    key_name: Mapped[str] = mapped_column(String(200))
    conversation_id: Mapped[int] = mapped_column(BigId)
    surface: Mapped[str] = mapped_column(String(32))  # describe_file | describe_summary | …
    subject: Mapped[str | None] = mapped_column(String(64))  # the summary or file id
    span_count: Mapped[int] = mapped_column(Integer)
    span_ids: Mapped[list[int]] = mapped_column(Json)
    read_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class SecretScanRun(Base):
    """One ``lcm secrets scan``: re-detect stored messages of a tenant or one conversation.

    The row is the job's lock and its progress. ``active_scope`` names the
    scope while the scan is pending or running and is cleared when it ends:
    the unique (tenant, active_scope) makes a second scan of the same scope
    impossible on either database. The worker claims it with a lease and a
    fencing token, as compaction claims its debt; ``cursor_*`` is where the
    next batch starts, so a scan resumes after a crash where it stopped.
    """

    __tablename__ = "secret_scans"
    __table_args__ = (UniqueConstraint("tenant_id", "active_scope"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant_id: Mapped[str] = tenant_fk(index=False)  # the unique constraint leads with it
    # None: every conversation of the tenant.
    conversation_id: Mapped[int | None] = mapped_column(
        BigId, ForeignKey("conversations.id", ondelete="CASCADE")
    )
    active_scope: Mapped[str | None] = mapped_column(String(40))
    status: Mapped[str] = mapped_column(String(16))  # pending | running | done | failed
    # The detector and rules this scan brings conversations up to (lcm.secrets.rules).
    detector_version: Mapped[str] = mapped_column(String(80))
    # Re-scan every conversation in scope, not only those scanned under another version.
    rescan_all: Mapped[bool] = mapped_column(Boolean, default=False)
    cursor_conversation_id: Mapped[int] = mapped_column(BigInteger, default=0)
    cursor_message_id: Mapped[int] = mapped_column(BigInteger, default=0)
    # The highest ordinal the cursor's conversation had when its scan began:
    # a value found anew is numbered above it, never reusing a retired ordinal.
    ordinal_floor: Mapped[int] = mapped_column(Integer, default=0)
    messages_total: Mapped[int] = mapped_column(Integer, default=0)
    messages_done: Mapped[int] = mapped_column(Integer, default=0)
    conversations_done: Mapped[int] = mapped_column(Integer, default=0)
    spans_written: Mapped[int] = mapped_column(Integer, default=0)
    lease_owner: Mapped[str | None] = mapped_column(String(64))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    fencing_token: Mapped[int] = mapped_column(Integer, default=0)
    # Claims since a slice last handed over: after max_attempts failed in a row, failed.
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime)


class SecretScanMark(Base):
    """The detector version a conversation's spans were last re-scanned with."""

    __tablename__ = "secret_scan_marks"

    tenant_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    conversation_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("conversations.id", ondelete="CASCADE"), primary_key=True
    )
    detector_version: Mapped[str] = mapped_column(String(80))
    scanned_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)

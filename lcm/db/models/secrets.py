"""Where secrets sit in stored text: spans over message parts and large files."""

from __future__ import annotations

from sqlalchemy import ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from lcm.db.models.base import Base, BigId, owned_tenant


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

"""Reads that return originals (``with_secrets``), each recorded (``lcm.secret_access.audit``).

The caller has checked that the reader may (the ``secrets`` scope, or the
local operator) and gives a session that can write: the audit row goes in
the same transaction as the read, so a read that fails records nothing and
a read that returns is always recorded.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Sequence

from sqlalchemy.orm import Session

from lcm.files.storage import FileStorage
from lcm.retrieval.describe import (
    FileDescription,
    SummaryDescription,
    describe_file,
    describe_summary,
    file_content_page,
)
from lcm.retrieval.expand import Expansion, expand
from lcm.secret_access.audit import Reader, record_read
from lcm.secret_access.repository import SecretAccessRepository


def summary_with_secrets(session: Session, reader: Reader, summary_id: str) -> SummaryDescription:
    """A summary as stored (one written before masking may quote a secret); no span in it."""
    found = describe_summary(session, reader.tenant_id, summary_id, mask=False)
    record_read(session, reader, found.conversation_id, "describe_summary", summary_id, [])
    return found


def file_with_secrets(
    session: Session,
    storage: FileStorage,
    reader: Reader,
    file_id: str,
    offset: int,
    limit: int,
) -> FileDescription:
    """A large file's description and a page of its text, as stored."""
    tenant_id = reader.tenant_id
    described = describe_file(session, tenant_id, file_id, mask=False)
    page = file_content_page(session, storage, tenant_id, file_id, offset, limit, mask=False)
    spans = SecretAccessRepository(session).live_file_spans(
        tenant_id, file_id, offset, offset + len(page.text)
    )
    record_read(session, reader, described.conversation_id, "describe_file", file_id, spans)
    return dataclasses.replace(described, content=page)


def expand_with_secrets(
    session: Session, reader: Reader, summary_ids: Sequence[str], token_cap: int
) -> Expansion:
    """An expansion with its messages as stored: one audit row per conversation read."""
    found = expand(session, reader.tenant_id, summary_ids, token_cap, mask=False)
    spans = SecretAccessRepository(session).live_message_spans(
        reader.tenant_id, [m.id for m in found.messages]
    )
    by_conversation: dict[int, list[int]] = defaultdict(list)
    for span_id, conversation_id in spans:
        by_conversation[conversation_id].append(span_id)
    subject = ",".join(summary_ids)[:64]
    for conversation_id in sorted({m.conversation_id for m in found.messages}):
        record_read(
            session, reader, conversation_id, "expand", subject, by_conversation[conversation_id]
        )
    return found


def record_export(session: Session, reader: Reader, conversation_id: int) -> None:
    """Record an export with originals before it streams: every live span of the conversation."""
    spans = SecretAccessRepository(session).live_conversation_spans(
        reader.tenant_id, conversation_id
    )
    record_read(session, reader, conversation_id, "export", None, spans)

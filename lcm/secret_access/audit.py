"""The audit of reads that returned originals: written with the read, listed by admins.

Every read with ``with_secrets`` writes one row per conversation it read
from: who (the key's id and name, or ``cli`` for the local operator), when,
the surface and the subject (a summary or file id), and the spans whose
originals it returned (their ids, the first ``MAX_LISTED_SPANS``; the
count is always whole). A describe or an expand writes it in the
transaction of its read; an export writes it before its first line (it
streams from a read-only snapshot afterwards), so an export cut off midway
is recorded as read. The rows are bounded by age: writing one deletes the
tenant's rows older than ``secrets_reads_retention_days``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from lcm.db.models import SecretRead, utcnow
from lcm.errors import InvalidInput
from lcm.secret_access.repository import SecretAccessRepository

MAX_LISTED_SPANS = 5000
CLI_READER = "cli"
MAX_PAGE = 200


@dataclass(frozen=True, slots=True)
class Reader:
    """Who reads originals: a key of the tenant, or the local operator (``key_id`` None)."""

    tenant_id: str
    key_id: int | None
    retention_days: int = 365


@dataclass(frozen=True, slots=True)
class SecretReadInfo:
    id: int
    key_id: int | None
    key_name: str
    conversation_id: int
    surface: str
    subject: str | None
    span_count: int
    span_ids: list[int]
    read_at: datetime


@dataclass(frozen=True, slots=True)
class SecretReadsPage:
    reads: list[SecretReadInfo]
    next_cursor: str | None


def record_read(
    session: Session,
    reader: Reader,
    conversation_id: int,
    surface: str,
    subject: str | None,
    span_ids: Sequence[int],
) -> None:
    """Write the audit row of one read, in the caller's transaction, and prune old rows."""
    repo = SecretAccessRepository(session)
    name = CLI_READER if reader.key_id is None else repo.key_name(reader.tenant_id, reader.key_id)
    now = utcnow()
    repo.prune_reads(reader.tenant_id, now - timedelta(days=reader.retention_days))
    repo.add_read(
        SecretRead(
            tenant_id=reader.tenant_id,
            key_id=reader.key_id,
            key_name=name,
            conversation_id=conversation_id,
            surface=surface,
            subject=subject,
            span_count=len(span_ids),
            span_ids=list(span_ids[:MAX_LISTED_SPANS]),
            read_at=now,
        )
    )


def list_reads(
    session: Session,
    tenant_id: str,
    *,
    conversation_id: int | None = None,
    key_id: int | None = None,
    cursor: str | None = None,
    limit: int = 50,
) -> SecretReadsPage:
    """The tenant's audit rows, newest first; ``next_cursor`` continues (None at the end)."""
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidInput(f"limit is 1 to {MAX_PAGE}")
    below: int | None = None
    if cursor is not None:
        if not cursor.isdigit() or len(cursor) > 19:
            raise InvalidInput("a bad cursor: pass the next_cursor of the previous page")
        below = int(cursor)
    rows = SecretAccessRepository(session).reads(
        tenant_id, conversation_id, key_id, below, limit + 1
    )
    more = len(rows) > limit
    rows = rows[:limit]
    return SecretReadsPage(
        [
            SecretReadInfo(
                r.id,
                r.key_id,
                r.key_name,
                r.conversation_id,
                r.surface,
                r.subject,
                r.span_count,
                list(r.span_ids or []),
                r.read_at,
            )
            for r in rows
        ],
        str(rows[-1].id) if more and rows else None,
    )

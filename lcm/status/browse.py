"""Read-only views for operators (``lcm messages``, ``lcm summaries``, ``lcm status``
without a key): a conversation's messages a page at a time, its summaries, and the
database's figures. Plain data out; the CLI renders it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy.orm import Session

from lcm.cursors import decode_cursor, encode_cursor
from lcm.db.models import Message
from lcm.errors import InvalidInput
from lcm.secrets import content_masks, mask_text
from lcm.status.repository import BrowseRepository

_CURSOR_PREFIX = "m1:"
MAX_PAGE = 1000


@dataclass(frozen=True, slots=True)
class MessageFilter:
    """Which messages of a conversation to read: by role, from a time, past a cursor."""

    role: str | None = None
    since: datetime | None = None
    cursor: str | None = None
    limit: int = 100
    tail: int | None = None  # the last ``tail`` messages instead of a page
    mask_secrets: bool = True  # the tenant's ``console`` surface (``lcm messages``)


@dataclass(frozen=True, slots=True)
class MessageRow:
    seq: int
    role: str
    created_at: datetime
    token_count: int
    content: str


@dataclass(frozen=True, slots=True)
class MessagePage:
    messages: list[MessageRow]
    next_cursor: str | None  # None on the last page (and after --tail)


@dataclass(frozen=True, slots=True)
class SummaryRow:
    id: str
    kind: str
    depth: int
    token_count: int
    descendant_count: int
    earliest_at: datetime
    latest_at: datetime
    in_context: bool


@dataclass(frozen=True, slots=True)
class TenantFigures:
    name: str
    id: str
    conversations: int
    messages: int


@dataclass(frozen=True, slots=True)
class DatabaseStatus:
    tenants: list[TenantFigures]
    conversations: int
    messages: int
    summaries: dict[int, int]  # by depth
    debt: dict[str, int]  # by status
    oldest_pending_debt_at: datetime | None
    oldest_pending_debt_seconds: float | None


def encode_message_cursor(seq: int) -> str:
    return encode_cursor(_CURSOR_PREFIX, seq)


def decode_message_cursor(cursor: str) -> int:
    return decode_cursor(_CURSOR_PREFIX, cursor, "cursor is not one `lcm messages` handed out")


def message_page(session: Session, conversation_id: int, wanted: MessageFilter) -> MessagePage:
    """One page of the conversation's messages in seq order.

    The cursor carries the last seq shown; seqs only grow, so paging to the
    end returns every message that matched once, whatever is appended meanwhile.
    """
    if not 1 <= wanted.limit <= MAX_PAGE:
        raise InvalidInput(f"limit must be 1..{MAX_PAGE}")
    repo = BrowseRepository(session)
    since = _utc(wanted.since)
    if wanted.tail is not None:
        rows = repo.messages(
            conversation_id,
            after_seq=None,
            role=wanted.role,
            since=since,
            limit=wanted.tail,
            newest_first=True,
        )
        return MessagePage(_rows(session, list(reversed(rows)), wanted.mask_secrets), None)
    after = decode_message_cursor(wanted.cursor) if wanted.cursor else None
    # One row more than asked tells whether another page exists.
    rows = repo.messages(
        conversation_id, after_seq=after, role=wanted.role, since=since, limit=wanted.limit + 1
    )
    page = _rows(session, rows[: wanted.limit], wanted.mask_secrets)
    more = len(rows) > wanted.limit
    return MessagePage(page, encode_message_cursor(page[-1].seq) if more else None)


def conversation_summaries(session: Session, conversation_id: int) -> list[SummaryRow]:
    """Every summary of the conversation (by time, then depth), marked if in its context."""
    repo = BrowseRepository(session)
    in_context = repo.summaries_in_context(conversation_id)
    return [
        SummaryRow(
            s.id,
            s.kind,
            s.depth,
            s.token_count,
            s.descendant_count,
            s.earliest_at,
            s.latest_at,
            s.id in in_context,
        )
        for s in repo.summaries(conversation_id)
    ]


def database_status(session: Session, now: datetime | None = None) -> DatabaseStatus:
    """The whole database's figures: tenants, conversations, messages, summaries, debt."""
    repo = BrowseRepository(session)
    messages = repo.messages_by_tenant()
    tenants = [
        TenantFigures(name, tenant_id, conversations, messages.get(tenant_id, 0))
        for tenant_id, name, conversations in repo.tenants()
    ]
    oldest = repo.oldest_pending_debt()
    age = ((now or datetime.now(UTC)) - oldest).total_seconds() if oldest else None
    return DatabaseStatus(
        tenants=tenants,
        conversations=sum(t.conversations for t in tenants),
        messages=sum(messages.values()),
        summaries=repo.summaries_by_depth(),
        debt=repo.debt_by_status(),
        oldest_pending_debt_at=oldest,
        oldest_pending_debt_seconds=age,
    )


def _rows(session: Session, messages: list[Message], mask: bool = True) -> list[MessageRow]:
    """The messages as rows, their detected secrets masked (one query for the page)."""
    masks = (
        content_masks(session, messages[0].tenant_id, [m.id for m in messages])
        if messages and mask
        else {}
    )
    return [
        MessageRow(
            m.seq,
            m.role,
            m.created_at,
            m.token_count,
            mask_text(m.content, masks[m.id]) if m.id in masks else m.content,
        )
        for m in messages
    ]


def _utc(value: datetime | None) -> datetime | None:
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)  # a time given without a zone is UTC

"""The operator's read-only views on SQLite and Postgres: keyset pages of a
conversation's messages and the database's figures."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from lcm.content import IncomingMessage
from lcm.conversations import resolve_for_read
from lcm.db.engine import Database
from lcm.db.models import CompactionDebt
from lcm.errors import InvalidInput
from lcm.ingest.service import ingest_messages, prepare_batch
from lcm.status import MessageFilter, database_status, message_page
from tests.conftest import new_tenant

ROLES = ("user", "assistant", "tool")


def _append(database: Database, tenant_id: str, texts: list[str]) -> None:
    with database.session() as session:
        batch = prepare_batch(
            [IncomingMessage(ROLES[i % 3], text) for i, text in enumerate(texts)],
            max_batch=1000,
            max_chars=10_000,
        )
        ingest_messages(session, tenant_id, "team/browse", None, batch)
        session.commit()


def test_paging_returns_every_message_once_while_more_arrive(db: Database) -> None:
    tenant_id = new_tenant(db).tenant_id
    _append(db, tenant_id, [f"m{i}" for i in range(20)])
    seen: list[str] = []
    cursor: str | None = None
    with db.read_session() as session:
        conversation_id = resolve_for_read(session, tenant_id, "team/browse").id
    while True:
        with db.read_session() as session:
            page = message_page(session, conversation_id, MessageFilter(cursor=cursor, limit=7))
        seen += [m.content for m in page.messages]
        if len(seen) == 7:  # messages appended between two pages are read once, in order
            _append(db, tenant_id, [f"late{i}" for i in range(3)])
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == [f"m{i}" for i in range(20)] + [f"late{i}" for i in range(3)]

    with db.read_session() as session:
        tools = message_page(session, conversation_id, MessageFilter(role="tool", limit=100))
        tail = message_page(session, conversation_id, MessageFilter(tail=4, role="user"))
        future = message_page(
            session,
            conversation_id,
            MessageFilter(since=datetime.now(UTC) + timedelta(days=1)),
        )
        with pytest.raises(InvalidInput):
            message_page(session, conversation_id, MessageFilter(cursor="not-ours"))
    assert [m.role for m in tools.messages] == ["tool"] * 7  # 6 of the first 20, 1 of the late 3
    assert [m.seq for m in tail.messages] == sorted(m.seq for m in tail.messages)
    assert len(tail.messages) == 4
    assert all(m.role == "user" for m in tail.messages)
    assert tail.next_cursor is None
    assert future.messages == []


def test_database_status_counts_tenants_messages_and_pending_debt(db: Database) -> None:
    # The figures are the whole database's: measured against what was there before.
    with db.read_session() as session:
        before = database_status(session)
    tenant_id = new_tenant(db, "counted").tenant_id
    new_tenant(db, "empty")
    _append(db, tenant_id, [f"m{i}" for i in range(5)])
    created = datetime.now(UTC) - timedelta(minutes=10)
    with db.session() as session:
        conversation_id = resolve_for_read(session, tenant_id, "team/browse").id
        debt = session.scalars(
            select(CompactionDebt).where(CompactionDebt.conversation_id == conversation_id)
        ).one_or_none()
        if debt is None:
            debt = CompactionDebt(
                conversation_id=conversation_id, tenant_id=tenant_id, reason="manual"
            )
            session.add(debt)
        debt.status = "pending"
        debt.created_at = created
        session.commit()
    with db.read_session() as session:
        status = database_status(session, now=created + timedelta(minutes=10))
    mine = [t for t in status.tenants if t.name in ("counted", "empty")]
    assert [(t.name, t.conversations, t.messages) for t in mine] == [
        ("counted", 1, 5),
        ("empty", 0, 0),
    ]
    assert len(status.tenants) == len(before.tenants) + 2
    assert status.conversations == before.conversations + 1
    assert status.messages == before.messages + 5
    assert status.debt.get("pending", 0) == before.debt.get("pending", 0) + 1
    if before.oldest_pending_debt_at is None:
        assert status.oldest_pending_debt_seconds == pytest.approx(600, abs=1)

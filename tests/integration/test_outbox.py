"""Jobs leave with the commit of the unit of work that asked for them, never without it."""

from __future__ import annotations

from collections.abc import Generator
from typing import cast

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from lcm.db.engine import Database
from lcm.db.models import CompactionDebt
from lcm.outbox import SummarizeFile, WakeCompaction, request_job
from lcm.tenants.service import IssuedKey
from tests.conftest import RecordingSender


@pytest.fixture
def recorded(db: Database) -> RecordingSender:
    db.sender = RecordingSender()
    return db.sender


def test_a_rolled_back_transaction_sends_nothing(db: Database, recorded: RecordingSender) -> None:
    with db.session() as session:
        request_job(session, WakeCompaction(1))
        session.execute(select(1))
        session.rollback()
        session.commit()  # a later commit of the same session must not resend it

    def fail_before_commit() -> None:
        with db.transaction() as session:
            request_job(session, SummarizeFile("file_abc"))
            raise RuntimeError("the unit of work fails before it commits")

    with pytest.raises(RuntimeError, match="fails before it commits"):
        fail_before_commit()
    assert recorded.jobs == []


def test_jobs_are_sent_once_after_the_commit(db: Database, recorded: RecordingSender) -> None:
    seen_at_send: list[int] = []
    with db.transaction() as session:
        request_job(session, WakeCompaction(7))
        request_job(session, WakeCompaction(7))  # asked twice in one unit of work: one job
        request_job(session, SummarizeFile("file_abc"))
        seen_at_send.append(len(recorded.jobs))  # nothing sent while the transaction is open
    assert seen_at_send == [0]
    assert recorded.jobs == [WakeCompaction(7), SummarizeFile("file_abc")]


def test_the_request_unit_of_work_commits_then_sends_or_rolls_back_and_drops(
    db: Database, tenant: IssuedKey, recorded: RecordingSender
) -> None:
    """``get_session`` (the routes' session): it commits when the route returns, not the route."""
    from api.deps import get_session

    failing = cast(Generator[Session, None, None], get_session(db))
    session = next(failing)
    session.add(CompactionDebt(conversation_id=None, tenant_id=tenant.tenant_id))
    request_job(session, WakeCompaction(1))
    with pytest.raises(RuntimeError):
        failing.throw(RuntimeError("the route raised"))
    assert recorded.jobs == []

    succeeding = get_session(db)
    session = next(succeeding)
    request_job(session, WakeCompaction(2))
    assert recorded.jobs == []  # not while the route runs
    with pytest.raises(StopIteration):
        next(succeeding)  # the route returned: commit, then send
    assert recorded.woken == [2]
    with db.session() as s:
        assert s.scalar(select(func.count()).select_from(CompactionDebt)) == 0

"""What ``record_debt`` does to the one debt row, for every state the row can be in.

The turn's debt is one upsert; these pin its coalescing rules on both
databases: which fields a new debt replaces, and when a wake-up is due.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from lcm.compaction.service import record_debt
from lcm.content import IncomingMessage
from lcm.db.engine import Database
from lcm.db.models import CompactionDebt, utcnow
from tests.conftest import IssuedKey
from tests.integration.test_ingest import ingest

EARLIER = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Case:
    status: str
    lease: str  # "live" | "expired" | "none"
    reason: str
    budget: int | None
    target: int | None
    woken: bool
    expected: dict[str, Any]


# The row before: reason "threshold", budget 100, target 70, 2 attempts,
# enqueued EARLIER, not re-armed.
CASES = {
    "pending, threshold again": Case(
        "pending",
        "none",
        "threshold",
        None,
        None,
        False,
        {"status": "pending", "reason": "threshold", "token_budget": 100, "target_tokens": 70},
    ),
    "pending, a budget of 0 keeps the owed one": Case(
        "pending",
        "none",
        "threshold",
        0,
        None,
        False,
        {"token_budget": 100},
    ),
    "pending, overflow replaces reason and target": Case(
        "pending",
        "none",
        "overflow",
        200,
        50,
        False,
        {"status": "pending", "reason": "overflow", "token_budget": 200, "target_tokens": 50},
    ),
    "pending, a threshold with a target replaces both": Case(
        "pending",
        "none",
        "threshold",
        None,
        40,
        False,
        {"reason": "threshold", "target_tokens": 40},
    ),
    "running, live lease: re-armed, no wake-up": Case(
        "running",
        "live",
        "manual",
        300,
        None,
        False,
        {
            "status": "running",
            "reason": "manual",
            "token_budget": 300,
            "target_tokens": None,
            "rearmed": True,
            "attempts": 2,
        },
    ),
    "running, expired lease: re-armed and woken": Case(
        "running",
        "expired",
        "threshold",
        None,
        None,
        True,
        {"status": "running", "reason": "threshold", "target_tokens": 70, "rearmed": True},
    ),
    "running, a repair keeps the target": Case(
        "running",
        "live",
        "repair",
        None,
        10,
        False,
        {"status": "running", "reason": "repair", "target_tokens": 70, "rearmed": True},
    ),
    "done: pending again, fresh attempts": Case(
        "done",
        "none",
        "threshold",
        500,
        None,
        True,
        {
            "status": "pending",
            "reason": "threshold",
            "token_budget": 500,
            "target_tokens": 70,
            "attempts": 0,
            "rearmed": False,
        },
    ),
    "failed, repair: pending with the repair": Case(
        "failed",
        "none",
        "repair",
        None,
        None,
        True,
        {"status": "pending", "reason": "repair", "target_tokens": 70, "attempts": 0},
    ),
}


def _conversation(db: Database, tenant: IssuedKey) -> int:
    msgs = [IncomingMessage("user", "rotated the cert")]
    return ingest(db, tenant.tenant_id, "k", msgs).conversation_id


def _row(db: Database, cid: int) -> CompactionDebt:
    with db.session() as s:
        debt = s.get(CompactionDebt, cid)
        assert debt is not None
        s.expunge(debt)
    return debt


def test_a_first_debt_is_pending_and_woken(db: Database, tenant: IssuedKey) -> None:
    cid = _conversation(db, tenant)
    before = utcnow()
    with db.transaction() as s:
        assert record_debt(s, tenant.tenant_id, cid, "overflow", 900, 300) is True
    debt = _row(db, cid)
    assert (debt.status, debt.reason, debt.token_budget, debt.target_tokens) == (
        "pending",
        "overflow",
        900,
        300,
    )
    assert (debt.attempts, debt.fencing_token, debt.rearmed) == (0, 0, False)
    assert debt.enqueued_at is not None
    assert debt.enqueued_at >= before
    assert debt.updated_at == debt.enqueued_at


@pytest.mark.parametrize("name", list(CASES))
def test_debt_coalesces_into_the_row(db: Database, tenant: IssuedKey, name: str) -> None:
    case = CASES[name]
    cid = _conversation(db, tenant)
    now = utcnow()
    lease = {"live": now + timedelta(minutes=5), "expired": now - timedelta(seconds=1)}
    with db.transaction() as s:
        s.add(
            CompactionDebt(
                conversation_id=cid,
                tenant_id=tenant.tenant_id,
                reason="threshold",
                status=case.status,
                token_budget=100,
                target_tokens=70,
                attempts=2,
                lease_owner="w:host:1" if case.lease != "none" else None,
                lease_expires_at=lease.get(case.lease),
                fencing_token=3,
                enqueued_at=EARLIER,
                updated_at=EARLIER,
            )
        )
    with db.transaction() as s:
        woken = record_debt(s, tenant.tenant_id, cid, case.reason, case.budget, case.target)
    assert woken is case.woken
    debt = _row(db, cid)
    for field, value in case.expected.items():
        assert getattr(debt, field) == value, field
    assert debt.updated_at > EARLIER
    assert debt.enqueued_at is not None
    assert (debt.enqueued_at > EARLIER) is case.woken
    assert (debt.fencing_token, debt.lease_owner) == (
        3,
        "w:host:1" if case.lease != "none" else None,
    )

"""Finding debt that nobody is working on (beat's reconciler)."""

from __future__ import annotations

from datetime import timedelta

from lcm.compaction.debt import DebtRepository
from lcm.compaction.engine import Transaction
from lcm.db.models import utcnow
from lcm.settings import Settings


def overdue_debts(
    transaction: Transaction, settings: Settings, grace_seconds: float | None = None
) -> list[int]:
    """Conversation ids to wake: pending debt with a stale wake-up, or an expired lease.

    A wake-up counts as stale after ``grace_seconds`` (the reconcile grace by
    default; 0 when the caller knows every queued wake-up is gone, e.g. an
    in-memory broker after a restart). Marks them as enqueued now, so two
    reconciler runs close together do not both wake the same debt (a
    duplicate wake-up would be harmless anyway: the claim lets one through).
    """
    now = utcnow()
    grace = settings.reconcile_grace_seconds if grace_seconds is None else grace_seconds
    with transaction() as session:
        debts = DebtRepository(session)
        due = debts.overdue(now, timedelta(seconds=grace), settings.reconcile_batch)
        debts.mark_enqueued(due, now)
    return due

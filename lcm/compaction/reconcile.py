"""Finding debt that nobody is working on (beat's reconciler)."""

from __future__ import annotations

from datetime import timedelta

from lcm.compaction.debt import DebtRepository
from lcm.compaction.engine import Transaction
from lcm.db.models import utcnow
from lcm.settings import Settings


def overdue_debts(transaction: Transaction, settings: Settings) -> list[int]:
    """Conversation ids to wake: pending debt with a stale wake-up, or an expired lease.

    Marks them as enqueued now, so two reconciler runs close together do not
    both wake the same debt (a duplicate wake-up would be harmless anyway:
    the claim lets one through).
    """
    now = utcnow()
    with transaction() as session:
        debts = DebtRepository(session)
        due = debts.overdue(
            now, timedelta(seconds=settings.reconcile_grace_seconds), settings.reconcile_batch
        )
        debts.mark_enqueued(due, now)
    return due

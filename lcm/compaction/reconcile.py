"""Debt that nobody is working on: beat's reconciler, and an operator's retry of failed debt."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from sqlalchemy.orm import Session

from lcm.compaction.debt_repository import DebtRepository
from lcm.db.engine import Transaction
from lcm.db.models import utcnow
from lcm.outbox import WakeCompaction, request_job
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


def retry_failed_debt(session: Session, conversation_ids: Sequence[int] | None) -> list[int]:
    """Re-arm failed debt (all of it for ``None``) and ask for a wake-up of each after commit.

    Returns the conversation ids re-armed; an id whose debt is not failed is
    skipped. If the wake-up cannot be sent, the reconciler wakes the row on
    its next run (it was left never-woken).
    """
    rearmed = DebtRepository(session).rearm_failed(conversation_ids, utcnow())
    for conversation_id in rearmed:
        request_job(session, WakeCompaction(conversation_id))
    return rearmed

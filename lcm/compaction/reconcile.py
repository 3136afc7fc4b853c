"""Debt that nobody is working on: beat's reconciler, and an operator's retry of failed debt."""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from lcm.compaction.debt_repository import DebtRepository
from lcm.compaction.fairness_repository import FairQueueRepository
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
        end_leases_of_dead_processes(debts, now)
        due = debts.overdue(now, timedelta(seconds=grace), settings.reconcile_batch)
        debts.mark_enqueued(due, now)
    return due


def keep_fair_queue(transaction: Transaction, limit: int) -> tuple[int, int]:
    """Beat's upkeep of the fair queue's flags: (tenants flagged, tenants cleared).

    Flags the tenants with pending debt that a path left unflagged, and
    clears the flags of tenants that owe nothing any more, each in its own
    short transaction, so it holds one tenant row at a time (as every claim
    does) and waits for none it cannot have (see
    lcm/compaction/fairness_repository.py, "The flag").
    """
    with transaction() as session:
        queue = FairQueueRepository(session)
        unflagged = queue.unflagged_owing(limit)
        settled = queue.flagged_settled(limit)
    for tenant_id in unflagged:
        with transaction() as session:
            FairQueueRepository(session).flag(tenant_id)
    cleared = 0
    for tenant_id in settled:
        with transaction() as session:
            cleared += FairQueueRepository(session).clear_if_settled(tenant_id)
    return len(unflagged), cleared


def end_leases_of_dead_processes(debts: DebtRepository, now: datetime) -> list[int]:
    """Expire the leases held by processes of this host that no longer exist.

    A killed ``lcm serve`` (or worker) leaves its lease running until it
    expires (``lease_seconds``, 5 minutes by default). Its owner name says
    which host and process held it; on this host, a process id that no
    longer exists cannot be holding anything, so the lease ends now and the
    reconciler wakes the debt at once. A pid the system has reused looks
    alive and the lease is simply waited out, the safe side; a holder that is
    only slow would be stopped by the fencing token anyway.
    """
    host = socket.gethostname()
    dead = [
        conversation_id
        for conversation_id, owner in debts.live_leases_on(host, now)
        if _owner_host(owner) == host and not _process_alive(owner)
    ]
    debts.end_leases(dead, now)
    return dead


def _owner_host(owner: str) -> str | None:
    parts = owner.split(":")
    return parts[-2] if len(parts) >= 3 else None


def _process_alive(owner: str) -> bool:
    """Whether the ``role:host:pid`` owner's process exists (unparseable: assume it does)."""
    pid_text = owner.rsplit(":", 1)[-1]
    if not pid_text.isdigit():
        return True
    try:
        os.kill(int(pid_text), 0)  # signal 0: an existence check, nothing is sent
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, under another user
    return True


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

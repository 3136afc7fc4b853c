"""Compaction owed, on the way in: the debt a turn records, and waiting for it to settle.

Use cases of the API and the CLI, run in the caller's unit of work; what the
workers run with that debt is :mod:`lcm.compaction.jobs`.
"""

from __future__ import annotations

import time
from datetime import datetime

from sqlalchemy.orm import Session

from lcm.compaction.debt_repository import DONE, FAILED, PENDING, REPAIR, RUNNING, DebtRepository
from lcm.compaction.repository import CompactionRepository
from lcm.completions import Completions, debt_key
from lcm.db.engine import Transaction
from lcm.db.models import CompactionDebt, utcnow
from lcm.outbox import WakeCompaction, request_job


def owe_compaction(
    session: Session,
    tenant_id: str,
    conversation_id: int,
    reason: str,
    token_budget: int | None,
    target_tokens: int | None = None,
    *,
    mode: str,
) -> None:
    """Record debt and, in deferred mode, ask the unit of work for a wake-up.

    Inline mode asks for none: the request runs the sweep itself once it has
    committed, and a worker already holding the lease finds the coalesced
    follow-up (``rearmed``) when it releases.
    """
    wake = record_debt(session, tenant_id, conversation_id, reason, token_budget, target_tokens)
    if wake and mode == "deferred":
        request_job(session, WakeCompaction(conversation_id))


def record_debt(
    session: Session,
    tenant_id: str,
    conversation_id: int,
    reason: str,
    token_budget: int | None,
    target_tokens: int | None = None,
) -> bool:
    """Upsert the one debt row; True when a wake-up should be sent after commit.

    Runs in the ingest transaction, which holds the conversation row lock, so
    two turns of one conversation never race here. Workers change the row with
    single conditional UPDATEs, which this row lock also orders.
    """
    debts = DebtRepository(session)
    now = utcnow()
    debt = debts.get(conversation_id, lock=True)
    if debt is None:
        debts.add(
            CompactionDebt(
                conversation_id=conversation_id,
                tenant_id=tenant_id,
                reason=reason,
                status=PENDING,
                token_budget=token_budget,
                target_tokens=target_tokens,
                enqueued_at=now,
                updated_at=now,
            )
        )
        return True
    debt.token_budget = token_budget or debt.token_budget
    debt.updated_at = now
    if reason == REPAIR:
        # Whatever the row's state: the running or pending chain (or the
        # follow-up) starts with the repair and keeps any target it had.
        debt.reason = reason
    elif reason in ("manual", "overflow") or target_tokens is not None:
        debt.reason, debt.target_tokens = reason, target_tokens
    if debt.status == RUNNING:
        # Coalesce: however many turns arrive during a sweep, one follow-up.
        debt.rearmed = True
        if debt.lease_expires_at is not None and debt.lease_expires_at < now:
            # The holder died or stalled past its lease (a killed `lcm serve`
            # takes its in-memory wake-ups with it): nobody will release the
            # row, so this turn sends a wake-up. Safe: the wake-up's claim
            # takes the expired lease over by bumping the fencing token, and
            # the old holder, if it is only slow, can then never commit
            # (check_fence refuses a stale token or an expired lease). Were
            # it to release first, ``rearmed`` turns that into a follow-up.
            debt.enqueued_at = now
            return True
        return False
    if debt.status == PENDING:
        return False  # a wake-up is already on its way (the reconciler covers its loss)
    debt.status, debt.reason, debt.attempts, debt.enqueued_at = PENDING, reason, 0, now
    return True


def context_token_total(session: Session, conversation_id: int) -> int:
    return CompactionRepository(session).context_token_total(conversation_id)


def wait_for_debt(
    transaction: Transaction,
    conversation_id: int,
    since: datetime,
    timeout: float,
    completions: Completions | None = None,
    recheck: float = 0.1,
) -> str | None:
    """Wait until the debt settles (done or failed) after ``since``; its status either way.

    Woken by ``completions`` (the worker notifies :func:`debt_key` once the
    debt settled) and, as a safety net for a lost wake-up, re-reads the row
    every ``recheck`` seconds; the row is the answer, the wake-up only a hint.
    A sweep that was already running when the caller asked re-arms the debt
    (pending again) when it ends, so "done after ``since``" means a sweep
    that saw the caller's request has finished.
    """
    deadline = time.monotonic() + timeout
    with (completions or Completions()).watch(debt_key(conversation_id)) as woken:
        while True:
            woken.clear()  # before the read: a notify after it is not lost
            with transaction() as session:
                debt = DebtRepository(session).get(conversation_id)
                status = None if debt is None else debt.status
                settled = (
                    debt is not None
                    and debt.status in (DONE, FAILED)
                    and (debt.updated_at >= since)
                )
            left = deadline - time.monotonic()
            if settled or left <= 0:
                return status
            woken.wait(min(recheck, left))

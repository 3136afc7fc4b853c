"""Compaction owed, on the way in: the debt a turn records, and waiting for it to settle.

Use cases of the API and the CLI, run in the caller's unit of work; what the
workers run with that debt is :mod:`lcm.compaction.jobs`.
"""

from __future__ import annotations

import time
from datetime import datetime

from sqlalchemy.orm import Session

from lcm.compaction.debt_repository import UNFINISHED, DebtListing, DebtRepository, debt_overview
from lcm.compaction.debt_statements import DONE, FAILED
from lcm.compaction.fairness_repository import FairQueueRepository
from lcm.compaction.repository import CompactionRepository
from lcm.completions import Completions, debt_key
from lcm.db.engine import Transaction
from lcm.db.models import utcnow
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
    # One upsert (``DebtRepository.owe``) applies the rules below to the row
    # as it is, under the row lock it takes. A new row is pending. On an
    # existing one, a given budget replaces the owed one; a repair becomes the
    # reason (keeping any target: the running or pending chain, or the
    # follow-up, starts with the repair); manual, overflow or a given target
    # replace reason and target. Then by status:
    # * running: ``rearmed`` (however many turns arrive during a sweep, one
    #   follow-up). If its lease expired (a killed `lcm serve` takes its
    #   in-memory wake-ups with it), nobody will release the row, so this turn
    #   sends a wake-up. Safe: the wake-up's claim takes the expired lease
    #   over by bumping the fencing token, and the old holder, if it is only
    #   slow, can then never commit (check_fence refuses a stale token or an
    #   expired lease). Were it to release first, ``rearmed`` turns that into
    #   a follow-up.
    # * pending: a wake-up is already on its way (the reconciler covers its loss).
    # * done or failed: pending again with this reason and a fresh attempt
    #   budget, and a wake-up.
    # The tenant is flagged first, as owing (tenant row, then debt row: the
    # lock order of every path; see lcm/compaction/fairness_repository.py).
    FairQueueRepository(session).flag(tenant_id)
    return DebtRepository(session).owe(
        conversation_id, tenant_id, reason, token_budget, target_tokens, utcnow()
    )


def list_debts(
    session: Session, status: str | None, tenant_id: str | None, limit: int
) -> list[DebtListing]:
    """Debt rows as an operator lists them, most recently changed first."""
    return DebtRepository(session).listing(status, tenant_id, limit)


def unfinished_debt(session: Session) -> tuple[dict[str, int], datetime | None]:
    """Unfinished debt rows by status (:data:`UNFINISHED`), and the oldest owed one's time."""
    return debt_overview(session)


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


__all__ = [
    "UNFINISHED",
    "DebtListing",
    "context_token_total",
    "list_debts",
    "owe_compaction",
    "record_debt",
    "unfinished_debt",
    "wait_for_debt",
]

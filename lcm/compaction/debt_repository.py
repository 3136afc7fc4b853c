"""The compaction debt row: the durable truth that work is owed, and its lock.

One row per conversation (primary key ``conversation_id``), so debt coalesces:
many turns over threshold make one row, not a queue of jobs. The Redis
message that wakes a worker is disposable; this row is what a lost message,
a dead worker or a flushed broker is recovered from.

The row is also the per-conversation lock. Every task *claims* it with a
single conditional ``UPDATE … RETURNING`` that bumps ``fencing_token``:

* a wake-up claims a ``pending`` row, or a ``running`` row whose lease has
  expired (its worker died or stalled);
* a chained pass claims a ``running`` row only if the token is still the one
  its predecessor handed it, so of two deliveries of the same message exactly
  one wins and the other is a no-op.

A pass commits only while its token is current and its lease unexpired
(:meth:`DebtRepository.check_fence`, run under a row lock inside the commit
transaction), so a worker that lost its lease can never write.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, or_, select, update
from sqlalchemy.orm import Session

from lcm.compaction.debt_statements import (
    CLAIM,
    FAILED,
    FENCE,
    HAND_OVER,
    OWE,
    PENDING,
    RELEASE,
    REPAIR,
    RUNNING,
    claim_params,
)
from lcm.db.driver import DriverStatement
from lcm.db.models import CompactionDebt, Conversation, Tenant
from lcm.errors import StaleLease


@dataclass(frozen=True, slots=True)
class Claim:
    """A held lease: whoever holds this token may run the next pass."""

    conversation_id: int
    tenant_id: str
    fencing_token: int
    owner: str
    reason: str
    token_budget: int | None
    target_tokens: int | None
    attempts: int
    enqueued_at: datetime | None  # when its wake-up was sent: queue lag = claim time - this


@dataclass(frozen=True, slots=True)
class DebtListing:
    """One debt row as an operator lists it."""

    conversation_id: int
    tenant_name: str
    session_key: str
    status: str
    reason: str
    attempts: int
    last_error: str | None
    updated_at: datetime


class DebtRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, conversation_id: int, *, lock: bool = False) -> CompactionDebt | None:
        stmt = select(CompactionDebt).where(CompactionDebt.conversation_id == conversation_id)
        if lock:
            stmt = stmt.with_for_update()
        return self.session.scalar(stmt)

    def add(self, debt: CompactionDebt) -> None:
        self.session.add(debt)
        self.session.flush()

    def owe(
        self,
        conversation_id: int,
        tenant_id: str,
        reason: str,
        token_budget: int | None,
        target_tokens: int | None,
        now: datetime,
    ) -> bool:
        """Insert the debt row or coalesce into it, in one statement; True: send a wake-up.

        The row as it is (locked by the statement) decides, as
        :func:`lcm.compaction.service.record_debt` describes. The wake-up is
        due exactly when the statement set ``enqueued_at`` to ``now``: a new
        row, a settled one made pending again, or a running one whose lease
        expired; a pending row, or a running one with a live lease, keeps its
        ``enqueued_at``.
        """
        # A repair keeps any target; manual, overflow and a given target replace it.
        replaces_target = reason != REPAIR and (
            reason in ("manual", "overflow") or target_tokens is not None
        )
        enqueued = OWE.run(
            self.session,
            {
                "conversation_id": conversation_id,
                "tenant_id": tenant_id,
                "reason": reason,
                "status": PENDING,
                "token_budget": token_budget,
                "target_tokens": target_tokens,
                "enqueued_at": now,
                "updated_at": now,
                "sets_reason": reason == REPAIR or replaces_target,
                "replaces_target": replaces_target,
            },
        ).one()[0]
        return bool(enqueued == now)

    def claim(
        self,
        conversation_id: int,
        owner: str,
        now: datetime,
        lease: timedelta,
        *,
        successor_of: int | None = None,
    ) -> Claim | None:
        """Take the lease, or return None when someone else holds it (or nothing is owed)."""
        params = claim_params(owner, now, lease)
        params["debt_id"] = conversation_id
        if successor_of is None:
            return self.claimed(CLAIM, params, owner)
        return self.claimed(HAND_OVER, {**params, "successor": successor_of}, owner)

    def claimed(
        self,
        statement: DriverStatement,
        params: dict[str, Any],
        owner: str,
    ) -> Claim | None:
        """Run a claim statement (:func:`claim_statement`); the claim it made, if any."""
        row = statement.run(self.session, params).one_or_none()
        if row is None:
            return None
        claimed, tenant_id, token, reason, budget, target, tries, created = row
        return Claim(
            int(claimed),
            tenant_id,
            int(token),
            owner,
            reason,
            budget,
            target,
            int(tries),
            created,
        )

    def check_fence(self, claim: Claim, now: datetime) -> None:
        """Raise ``StaleLease`` unless ``claim`` still holds an unexpired lease.

        Locks the row (``FOR UPDATE`` on Postgres) so no claim can slip in
        between this check and the caller's commit.
        """
        row = FENCE.run(self.session, {"debt_id": claim.conversation_id}).one_or_none()
        if row is None:
            raise StaleLease(f"fencing token {claim.fencing_token} is no longer current")
        fencing_token, status, lease_expires_at = row
        if fencing_token != claim.fencing_token or status != RUNNING:
            raise StaleLease(f"fencing token {claim.fencing_token} is no longer current")
        if lease_expires_at is None or lease_expires_at <= now:
            raise StaleLease(f"the lease of token {claim.fencing_token} expired")

    def release(self, claim: Claim, now: datetime) -> bool:
        """Finish the sweep: done, or pending again if debt arrived meanwhile.

        Returns True when the row went back to pending (it needs a wake-up).
        One conditional ``UPDATE``: it does nothing unless ``claim`` still
        holds the token, and reads ``rearmed`` under the row lock it takes,
        so a turn re-arming the debt concurrently is either seen here or
        waits and then finds the row done (and makes it pending itself).
        """
        status = RELEASE.run(
            self.session,
            {
                "debt_id": claim.conversation_id,
                "token": claim.fencing_token,
                "now": now,
            },
        )
        return status.scalar() == PENDING

    def fail(
        self, claim: Claim, error: str, now: datetime, max_attempts: int, retry_at: datetime
    ) -> str | None:
        """Record a failed pass: pending (retry at ``retry_at``) or failed for good.

        Returns the new status, or None if the claim was stale (nothing written).
        """
        debt = self.get(claim.conversation_id, lock=True)
        if debt is None or debt.fencing_token != claim.fencing_token:
            return None
        debt.attempts += 1
        debt.last_error = error[:2000]
        debt.lease_owner = None
        debt.lease_expires_at = None
        debt.updated_at = now
        debt.status = FAILED if debt.attempts >= max_attempts else PENDING
        # enqueued_at doubles as "not before": the reconciler leaves a pending
        # row alone until its scheduled retry is overdue.
        debt.enqueued_at = retry_at
        return debt.status

    def defer(self, claim: Claim, now: datetime, until: datetime) -> bool:
        """Give the lease back without spending an attempt: pending again, not before ``until``.

        False if the claim was stale (nothing written).
        """
        debt = self.get(claim.conversation_id, lock=True)
        if debt is None or debt.fencing_token != claim.fencing_token:
            return False
        debt.status = PENDING
        debt.rearmed = False  # it is pending anyway: the delayed wake-up covers new debt
        debt.lease_owner = None
        debt.lease_expires_at = None
        debt.updated_at = now
        # enqueued_at doubles as "not before" (see ``fail``).
        debt.enqueued_at = until
        return True

    def mark_enqueued(self, conversation_ids: list[int], when: datetime) -> None:
        if conversation_ids:
            self.session.execute(
                update(CompactionDebt)
                .where(CompactionDebt.conversation_id.in_(conversation_ids))
                .values(enqueued_at=when)
            )

    def overdue(self, now: datetime, grace: timedelta, limit: int) -> list[int]:
        """Debt whose wake-up was probably lost, or whose lease expired.

        Either way only once per ``grace``: a woken row is marked enqueued, so
        reconciler runs close together do not pile up wake-ups for it.
        """
        not_recently_woken = or_(
            CompactionDebt.enqueued_at.is_(None), CompactionDebt.enqueued_at < now - grace
        )
        abandoned = (CompactionDebt.status == RUNNING) & (CompactionDebt.lease_expires_at < now)
        return list(
            self.session.scalars(
                select(CompactionDebt.conversation_id)
                .where(not_recently_woken, or_(CompactionDebt.status == PENDING, abandoned))
                .order_by(CompactionDebt.updated_at)
                .limit(limit)
            )
        )

    def live_leases_on(self, host: str, now: datetime) -> list[tuple[int, str]]:
        """(conversation id, lease owner) of unexpired leases held by owners on ``host``.

        Owners are named ``role:host:pid`` (``lcm.services.Services``).
        """
        rows = self.session.execute(
            select(CompactionDebt.conversation_id, CompactionDebt.lease_owner).where(
                CompactionDebt.status == RUNNING,
                CompactionDebt.lease_expires_at >= now,
                CompactionDebt.lease_owner.like(f"%:{host}:%"),
            )
        )
        return [(int(cid), str(owner)) for cid, owner in rows]

    def end_leases(self, conversation_ids: Sequence[int], now: datetime) -> None:
        """Expire these leases now (their holders are known dead); fencing does the rest."""
        if conversation_ids:
            self.session.execute(
                update(CompactionDebt)
                .where(
                    CompactionDebt.conversation_id.in_(list(conversation_ids)),
                    CompactionDebt.status == RUNNING,
                )
                .values(lease_expires_at=now - timedelta(microseconds=1))
            )

    def listing(self, status: str | None, tenant_id: str | None, limit: int) -> list[DebtListing]:
        """Debt rows, most recently changed first, optionally of one status and tenant."""
        stmt = (
            select(
                CompactionDebt.conversation_id,
                Tenant.name,
                Conversation.session_key,
                CompactionDebt.status,
                CompactionDebt.reason,
                CompactionDebt.attempts,
                CompactionDebt.last_error,
                CompactionDebt.updated_at,
            )
            .join(Conversation, Conversation.id == CompactionDebt.conversation_id)
            .join(Tenant, Tenant.id == CompactionDebt.tenant_id)
            .order_by(CompactionDebt.updated_at.desc(), CompactionDebt.conversation_id)
            .limit(limit)
        )
        if status is not None:
            stmt = stmt.where(CompactionDebt.status == status)
        if tenant_id is not None:
            stmt = stmt.where(CompactionDebt.tenant_id == tenant_id)
        return [DebtListing(*row) for row in self.session.execute(stmt)]

    def rearm_failed(self, conversation_ids: Sequence[int] | None, now: datetime) -> list[int]:
        """Failed debt back to pending with a fresh attempt budget; the ids it re-armed.

        ``None`` re-arms every failed row. Conditional on ``status = failed``,
        so a row that a turn re-armed meanwhile (or that is running) is left
        alone. ``enqueued_at`` is cleared: the wake-up the caller asks for may
        not reach a worker (no broker from here), and a never-woken row is
        what the reconciler wakes on its next run.
        """
        stmt = (
            update(CompactionDebt)
            .where(CompactionDebt.status == FAILED)
            .values(status=PENDING, attempts=0, enqueued_at=None, updated_at=now)
            .returning(CompactionDebt.conversation_id)
        )
        failed = select(CompactionDebt.tenant_id).where(CompactionDebt.status == FAILED)
        if conversation_ids is not None:
            stmt = stmt.where(CompactionDebt.conversation_id.in_(conversation_ids))
            failed = failed.where(CompactionDebt.conversation_id.in_(conversation_ids))
        # Their tenants are flagged as owing first: tenant rows before debt
        # rows, the lock order of every path (lcm/compaction/fairness_repository.py).
        self.session.execute(
            update(Tenant).where(Tenant.id.in_(failed)).values(compaction_due=True)
        )
        return sorted(self.session.scalars(stmt))


# The statuses the metrics count: work owed or given up on. Finished rows are
# one per conversation ever compacted, nearly the whole table; counting them
# read every entry of the status index at each scrape of each API process.
UNFINISHED = (PENDING, RUNNING, FAILED)


def debt_overview(session: Session) -> tuple[dict[str, int], datetime | None]:
    """Unfinished debt rows by status, and when the oldest still-owed one was last woken.

    Both read only unfinished rows, through the index on ``status``.
    """
    by_status = {
        str(status): int(count)
        for status, count in session.execute(
            select(CompactionDebt.status, func.count())
            .where(CompactionDebt.status.in_(UNFINISHED))
            .group_by(CompactionDebt.status)
        )
    }
    oldest = session.scalar(
        select(func.min(CompactionDebt.enqueued_at)).where(
            CompactionDebt.status.in_((PENDING, RUNNING))
        )
    )
    return by_status, oldest

"""Fair compaction across tenants: a wake-up serves the tenant that waited longest.

The problem. The compaction queue is one FIFO of wake-ups. Debt is already
coalesced per conversation (one debt row, one wake-up while it is pending),
but a tenant with 10,000 conversations owing compaction still puts 10,000
wake-ups in front of another tenant's first one, which would wait for all of
them.

The design. A wake-up is not bound to the conversation it was sent for: it is
a token that says "one unit of compaction may start now". The worker that
takes it claims the due pending debt of the tenant whose debt was claimed
least recently (``tenants.compaction_claimed_at``, never claimed first), the
oldest of that tenant's, and stamps the tenant. Tenants with pending debt are
thus served round-robin, whatever the order their wake-ups were queued in: a
tenant's first pass starts with the next wake-up any worker takes (after at
most the passes already running, one per pool slot), however long the queue.

Why nothing is lost. Every pending debt sent one wake-up when it became
pending, and a wake-up claims at most one debt, so there are always at least
as many wake-ups queued as pending debts; each debt is claimed by some
wake-up, just not necessarily its own. A wake-up that finds nothing due falls
back to the conversation it was sent for, which also covers taking over an
expired lease. Beat's reconciler still re-wakes debt whose wake-up was lost.

What stays as it was. Claiming is still the debt row's conditional UPDATE
(lease, fencing token): a race between two workers for the same debt is lost
by one of them, which then picks again. Retries keep their delay: a pending
row whose ``enqueued_at`` ("not before") is in the future is not due. The
chained passes of a sweep stay bound to their conversation and token.

Lock order. The claim stamps the tenant row before it claims the debt row,
the same order as ingest (the quota charge locks the tenant row, then the
threshold debt locks the debt row), so the two never deadlock. A worker holds
at most one tenant row: a claim that loses a race retries the same tenant's
next due debt under the lock it already holds (which also queues the other
workers behind it instead of letting them collide again), and only when that
tenant has nothing due does it roll its pick back, releasing the row, before
it picks another tenant. Two workers holding one tenant each and waiting for
the other's cannot happen.

Claiming without waiting. The order above, run as written, makes every
claim of one tenant wait for the previous claim to commit: they all stamp
the same tenant row. So a wake-up first tries a claim that never waits for
a row lock (``FOR UPDATE SKIP LOCKED`` on Postgres; SQLite runs one writer at
a time, so nothing is locked there and the same statements simply run in
turn):

1. stamp the least recently served tenant with due debt whose row no one
   holds (:meth:`FairQueueRepository.stamp_next_free`), and claim its oldest
   due debt that no one holds;
2. if every such tenant's row is held (other claimers serve them right now),
   claim the oldest due debt no one holds of the least recently served of
   them, without stamping: the holder stamps it.

Skipping locked rows cannot by itself decide that nothing is due: a debt
row skipped because another claimer holds it stays pending if that claim
rolls back, and a wake-up that then gave up would break the promise above
(one wake-up per pending debt). So a wake-up whose no-wait claim finds
nothing runs the waiting claim described under "Lock order", which sees
every committed row. A no-wait claim never waits, so it can be part of no
deadlock; the waiting claim keeps the one-tenant-row rule.

The flag. Choosing "the least recently served tenant with due debt" by
joining every tenant with the owed rows cost a read of every tenant per pass
(at 100,000 tenants, 9-20 ms: ``python -m bench fair_choice``). So a tenant
that may owe carries ``compaction_due``, and a partial index holds the
flagged tenants in the queue's order; a wake-up walks it from the start.
It is set in the transaction that makes any of the tenant's debt pending
from no row, done or failed (``record_debt``, ``rearm_failed``), before the
debt row: tenant first, debt second, as ingest locks them. A move from
running back to pending needs nothing, because a tenant with running debt is
never cleared. Beat's reconciler clears it (``clear_if_settled``, from
``lcm.compaction.reconcile.keep_fair_queue``) for a tenant that has neither
pending nor running debt, checked by a statement that starts after it holds
the tenant's row, so a setter either waits for that row and flags the tenant
again, or committed its debt before the check saw it. The reconciler also
flags any tenant with pending debt and no flag (``unflagged_owing``): a path
that missed it costs a reconcile interval of fairness, not starvation.

Cost. Choosing the tenant walks the flagged tenants from the least recently
served and probes each for due debt (``ix_compaction_debt_fair``: tenant,
status, enqueued_at) until one has some; choosing its conversation is one
more probe.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import BindParameter, bindparam, exists, or_, select, update
from sqlalchemy.orm import Session

from lcm.compaction.debt_repository import Claim, DebtRepository
from lcm.compaction.debt_statements import PENDING, RUNNING, claim_params, claim_statement
from lcm.db.driver import DriverStatement
from lcm.db.models import CompactionDebt, Tenant


class FairQueueRepository:
    """The SQL of the round-robin choice; claiming itself is ``DebtRepository.claim``."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def next_due(self, now: datetime) -> tuple[str, int] | None:
        """(tenant, conversation) whose pending debt should be claimed next, if any is due."""
        tenant_id = _DUE_TENANTS.run(self.session, {"now": now, "limit": 1}).scalar()
        if tenant_id is None:
            return None
        conversation_id = self.oldest_due(tenant_id, now)
        return None if conversation_id is None else (tenant_id, conversation_id)

    def oldest_due(self, tenant_id: str, now: datetime) -> int | None:
        """The tenant's pending debt that waited longest and is due, if any."""
        params = {"for_tenant": tenant_id, "now": now}
        conversation_id = _OLDEST_DUE.run(self.session, params).scalar()
        return None if conversation_id is None else int(conversation_id)

    def stamp_next_free(self, now: datetime) -> str | None:
        """Stamp the least recently served tenant with due debt that no one holds; its id.

        Never waits: a tenant row another transaction holds (a claimer
        serving that tenant, or ingest charging its quota) is skipped.
        """
        tenant_id = _STAMP_NEXT_FREE.run(self.session, {"now": now}).scalar()
        return None if tenant_id is None else str(tenant_id)

    def claim_oldest_due_free(
        self, tenant_id: str, owner: str, now: datetime, lease: timedelta
    ) -> Claim | None:
        """Claim the tenant's oldest due debt that no one holds, in one statement; never waits."""
        params = {**claim_params(owner, now, lease), "for_tenant": tenant_id}
        return DebtRepository(self.session).claimed(_CLAIM_OLDEST_FREE, params, owner)

    def due_tenants(self, now: datetime, limit: int) -> list[str]:
        """Up to ``limit`` tenants with due debt, least recently served first (no lock)."""
        params = {"now": now, "limit": limit}
        return [str(t) for t in _DUE_TENANTS.run(self.session, params).scalars()]

    def flag(self, tenant_id: str) -> None:
        """Mark the tenant as owing (see "The flag" above); before its debt row is touched.

        Unconditional: an update that skipped a row it reads as flagged would
        not wait for a clearer holding that row, which could then unflag it
        with this debt owed.
        """
        _FLAG.run(self.session, {"for_tenant": tenant_id})

    def unflagged_owing(self, limit: int) -> list[str]:
        """Tenants with pending debt and no flag: a path that missed it (beat flags them)."""
        owing = select(CompactionDebt.tenant_id).where(CompactionDebt.status == PENDING)
        return list(
            self.session.scalars(
                select(Tenant.id)
                .where(Tenant.compaction_due.is_(False), Tenant.id.in_(owing))
                .limit(limit)
            )
        )

    def flagged_settled(self, limit: int) -> list[str]:
        """Flagged tenants that owe nothing now (candidates: ``clear_if_settled`` re-checks)."""
        return list(self.session.scalars(select(Tenant.id).where(_FLAGGED, ~_OWES).limit(limit)))

    def clear_if_settled(self, tenant_id: str) -> bool:
        """Unflag the tenant if it owes nothing, checked once its row is held; never waits.

        The check is its own statement, so it starts after the row lock is
        taken: a setter (``flag``) either committed its debt before it, and
        the check sees the debt, or waits for this transaction and flags the
        tenant again after it.
        """
        held = self.session.scalar(
            select(Tenant.id)
            .where(Tenant.id == tenant_id, Tenant.compaction_due.is_(True))
            .with_for_update(skip_locked=True)
        )
        if held is None:
            return False  # unflagged already, erased, or in use (a claim, an ingest)
        cleared = self.session.scalar(
            update(Tenant)
            .where(Tenant.id == tenant_id, ~_OWES)
            .values(compaction_due=False)
            .returning(Tenant.id)
        )
        return cleared is not None

    def mark_served(self, tenant_id: str, now: datetime) -> None:
        """Send the tenant to the back of the round (locks its row until the claim commits)."""
        _MARK_SERVED.run(self.session, {"for_tenant": tenant_id, "now": now})


# Built once with bound parameters (see ``debt_repository``: every wake-up runs them).
_NOW: BindParameter[datetime] = bindparam("now")
# Due: pending, and not held back by a retry delay (``enqueued_at`` is "not before").
_DUE = (CompactionDebt.status == PENDING) & or_(
    CompactionDebt.enqueued_at.is_(None), CompactionDebt.enqueued_at <= _NOW
)

# Among the flagged tenants only, in the order of their partial index
# (``ix_tenants_compaction_due``): the walk starts at the least recently
# served and stops at the first with due debt, instead of joining every
# tenant with the owed rows. A flagged tenant owes nothing due only while a
# pass of it runs or a retry waits, or until beat clears a stale flag.
_WAITED_LONGEST = (Tenant.compaction_claimed_at.asc(), Tenant.id)
# The bare column, as the partial index's predicate reads (``IS true`` would
# not match it, and the planner would read every tenant).
_FLAGGED = Tenant.compaction_due
_OWES_DUE = _FLAGGED & exists().where(CompactionDebt.tenant_id == Tenant.id, _DUE)

# Owes anything at all: a pending row (due or not) or a pass running.
_OWES = exists().where(
    CompactionDebt.tenant_id == Tenant.id, CompactionDebt.status.in_((PENDING, RUNNING))
)

_STAMP_NEXT_FREE = DriverStatement(
    update(Tenant)
    .where(
        Tenant.id
        == select(Tenant.id)
        .where(_OWES_DUE)
        .order_by(*_WAITED_LONGEST)
        .limit(1)
        .with_for_update(skip_locked=True)
        .scalar_subquery()
    )
    .values(compaction_claimed_at=_NOW)
    .returning(Tenant.id)
)

# Tenants with due debt, least recently served first; a tenant's oldest due
# debt; a tenant sent to the back of the round.
_DUE_TENANTS = DriverStatement(
    select(Tenant.id).where(_OWES_DUE).order_by(*_WAITED_LONGEST).limit(bindparam("limit"))
)
_OLDEST_DUE_OF_TENANT = (
    select(CompactionDebt.conversation_id)
    .where(CompactionDebt.tenant_id == bindparam("for_tenant"), _DUE)
    .order_by(CompactionDebt.enqueued_at.asc().nulls_first())
    .limit(1)
)
_OLDEST_DUE = DriverStatement(_OLDEST_DUE_OF_TENANT)
_FLAG = DriverStatement(
    update(Tenant).where(Tenant.id == bindparam("for_tenant")).values(compaction_due=True)
)
_MARK_SERVED = DriverStatement(
    update(Tenant).where(Tenant.id == bindparam("for_tenant")).values(compaction_claimed_at=_NOW)
)

# The tenant's oldest due debt that no other transaction holds, chosen and
# claimed in one statement (the row is locked once chosen).
_CLAIM_OLDEST_FREE = DriverStatement(
    claim_statement(
        CompactionDebt.conversation_id
        == _OLDEST_DUE_OF_TENANT.with_for_update(skip_locked=True).scalar_subquery()
    )
)

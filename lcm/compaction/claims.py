"""How a compaction job takes a conversation's lease, and reads what its pass needs.

A chained pass takes the lease its predecessor handed over (the fencing
token); a wake-up takes the due debt of the tenant that waited longest
(``fairness_repository`` explains the round-robin and why it loses nothing).
Each claim is one short transaction; what the pass then needs (the
effective settings and the context) is read with it or right after it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from lcm.compaction.debt_repository import Claim, DebtRepository
from lcm.compaction.fairness_repository import FairQueueRepository
from lcm.compaction.repository import CompactionRepository
from lcm.context import ContextEntry
from lcm.db.engine import Transaction
from lcm.policy import for_model, for_session
from lcm.settings import CompactionSettings, Settings, TenantSettings
from lcm.tenants.service import with_overrides

# Picks per fair wake-up before it settles for the conversation it was sent
# for: each lost race means another worker claimed that tenant's debt.
FAIR_CLAIM_TRIES = 5

Read = tuple[Claim, CompactionSettings, list[ContextEntry]]
"""A held lease, the settings its pass runs with and the context it starts from."""


class LeaseClaims:
    """Claims for one worker (``owner`` names it in leases)."""

    def __init__(
        self,
        transaction: Transaction,
        settings: Settings,
        owner: str,
        clock: Callable[[], datetime],
        reads: Transaction | None = None,
    ) -> None:
        self.transaction = transaction
        self.reads = reads or transaction  # see CompactionEngine: the context's read
        self.settings = settings
        self.owner = owner
        self.clock = clock
        self.lease = timedelta(seconds=settings.lease_seconds)

    def claim(self, conversation_id: int, successor_of: int | None) -> Read | None:
        """Claim the lease and, in the same short transaction, read what the pass needs.

        One transaction, not two: this claim locks only the conversation's
        debt row, which nothing else waits for while the lease is being taken.
        """
        with self.transaction() as session:
            claim = DebtRepository(session).claim(
                conversation_id, self.owner, self.clock(), self.lease, successor_of=successor_of
            )
            return None if claim is None else self._read(session, claim)

    def claim_fairly(self, fallback: int) -> Read | None:
        """Claim the round-robin choice (see ``fairness_repository``), else ``fallback``.

        The claim commits in its own short transaction before the context is
        read (in a ``reads`` session, see ``CompactionEngine``): the claim
        stamps a tenant row, which ingest of that tenant waits for, so it
        must not stay locked while a whole context is read. The lease is
        held from the claim's commit on, and the pass re-checks its range
        under the fence before it writes.
        """
        claim = self.claim_without_waiting()
        if claim is None:
            claim = self._claim_waiting(fallback)
        if claim is None:
            return None
        with self.reads() as session:
            return self._read(session, claim)

    def claim_without_waiting(self) -> Claim | None:
        """Claim due debt without waiting for any row lock; ``None`` does not mean none is due.

        Rows other transactions hold are skipped (``SKIP LOCKED``), so
        concurrent wake-ups of one tenant claim different debts side by side
        instead of queueing on the tenant row. See ``fairness_repository``.
        """
        with self.transaction() as session:
            queue, now = FairQueueRepository(session), self.clock()
            tenant_id = queue.stamp_next_free(now)
            if tenant_id is not None:
                claim = queue.claim_oldest_due_free(tenant_id, self.owner, now, self.lease)
                if claim is not None:
                    return claim
                # Its due debts are all being claimed right now: it is being
                # served, so its stamp stands.
            # Every tenant with due debt is held by a claimer serving it:
            # take one of their debts no one holds (their holders stamp them).
            for busy in queue.due_tenants(now, FAIR_CLAIM_TRIES):
                claim = queue.claim_oldest_due_free(busy, self.owner, now, self.lease)
                if claim is not None:
                    return claim
            return None

    def _claim_waiting(self, fallback: int) -> Claim | None:
        """The claim that waits for row locks: sees every committed debt, so nothing is lost."""
        with self.transaction() as session:
            debts, queue = DebtRepository(session), FairQueueRepository(session)
            # Each pick is a savepoint holding one tenant row (stamped before
            # its debt row: ingest's order). A claim that loses a race tries
            # the same tenant's next due debt under that lock; a tenant with
            # nothing left rolls back, releasing its row before another is
            # locked, so no two workers can each hold a tenant the other wants
            # (see ``fairness_repository``).
            for _ in range(FAIR_CLAIM_TRIES):
                now = self.clock()
                due = queue.next_due(now)
                if due is None:
                    break
                tenant_id, conversation_id = due
                pick = session.begin_nested()
                queue.mark_served(tenant_id, now)
                claim = debts.claim(conversation_id, self.owner, now, self.lease)
                while claim is None and (nxt := queue.oldest_due(tenant_id, now)) is not None:
                    claim = debts.claim(nxt, self.owner, now, self.lease)
                if claim is None:
                    pick.rollback()
                    continue
                pick.commit()
                return claim
            return debts.claim(fallback, self.owner, self.clock(), self.lease)

    def _read(
        self, session: Session, claim: Claim
    ) -> tuple[Claim, TenantSettings, list[ContextEntry]]:
        repo = CompactionRepository(session)
        found = repo.overrides_and_model(claim.conversation_id)
        overrides, model_id, context_window, session_key = found
        # The tenant's overrides, then the rule of model_overrides the
        # conversation's latest turn matched, then the summary model its
        # session key is given (summary_model_overrides).
        tenant = with_overrides(self.settings, overrides)
        settings = for_session(for_model(tenant, model_id, context_window), session_key)
        entries = repo.load_entries(claim.conversation_id)
        return claim, settings, entries

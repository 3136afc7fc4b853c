"""The fair queue's flag: who sets it, who clears it, and a setter racing a clearer.

A wake-up looks for due debt only among tenants flagged ``compaction_due``
(lcm/compaction/fairness_repository.py, "The flag"). A tenant that owes and
is not flagged would wait behind every flagged one, so the invariant that
matters is: pending debt implies a flag, whatever the interleaving.
"""

from __future__ import annotations

import threading
import time

from sqlalchemy import select, update

from lcm.compaction.debt_repository import DebtRepository
from lcm.compaction.debt_statements import DONE, FAILED, PENDING
from lcm.compaction.fairness_repository import FairQueueRepository
from lcm.compaction.reconcile import keep_fair_queue
from lcm.compaction.service import record_debt
from lcm.db.engine import Database
from lcm.db.models import CompactionDebt, Tenant, utcnow
from tests.conftest import new_tenant
from tests.integration.retrieval_data import ingest


def _flagged(db: Database, tenant_id: str) -> bool:
    with db.session() as s:
        return bool(s.scalar(select(Tenant.compaction_due).where(Tenant.id == tenant_id)))


def _set_status(db: Database, conversation_id: int, status: str) -> None:
    with db.transaction() as s:
        s.execute(
            update(CompactionDebt)
            .where(CompactionDebt.conversation_id == conversation_id)
            .values(status=status)
        )


def test_owing_flags_the_tenant_and_beat_clears_it_once_it_owes_nothing(db: Database) -> None:
    tenant = new_tenant(db)
    cid = ingest(db, tenant.tenant_id, "agent", ["hello"])
    assert not _flagged(db, tenant.tenant_id)
    with db.transaction() as s:
        record_debt(s, tenant.tenant_id, cid, "threshold", None)
    assert _flagged(db, tenant.tenant_id)
    _set_status(db, cid, "running")
    assert keep_fair_queue(db.transaction, 100) == (0, 0)  # a pass runs: it stays
    assert _flagged(db, tenant.tenant_id)
    _set_status(db, cid, DONE)
    assert keep_fair_queue(db.transaction, 100) == (0, 1)
    assert not _flagged(db, tenant.tenant_id)
    _set_status(db, cid, FAILED)
    with db.transaction() as s:
        assert DebtRepository(s).rearm_failed([cid], utcnow()) == [cid]
    assert _flagged(db, tenant.tenant_id)


def test_beat_flags_a_tenant_that_owes_without_one(db: Database) -> None:
    """A path that misses the flag costs a reconcile interval, not starvation."""
    first, missed = new_tenant(db, "first"), new_tenant(db, "missed")
    ids = {}
    for tenant in (first, missed):
        ids[tenant.tenant_id] = ingest(db, tenant.tenant_id, "agent", ["hello"])
        with db.transaction() as s:
            record_debt(s, tenant.tenant_id, ids[tenant.tenant_id], "threshold", None)
    with db.transaction() as s:
        s.execute(update(Tenant).where(Tenant.id == missed.tenant_id).values(compaction_due=False))
        # Served least recently, yet not chosen: the choice reads the flags.
        s.execute(update(Tenant).values(compaction_claimed_at=utcnow()))
    with db.session() as s:
        assert FairQueueRepository(s).due_tenants(utcnow(), 10) == [first.tenant_id]
    assert keep_fair_queue(db.transaction, 100) == (1, 0)
    with db.session() as s:
        chosen = FairQueueRepository(s).due_tenants(utcnow(), 10)
    assert sorted(chosen) == sorted([first.tenant_id, missed.tenant_id])


def test_a_clearer_holding_the_tenant_makes_the_setter_wait_and_flag_again(
    pg_db: Database,
) -> None:
    tenant = new_tenant(pg_db)
    cid = ingest(pg_db, tenant.tenant_id, "agent", ["hello"])
    with pg_db.transaction() as s:
        s.execute(update(Tenant).values(compaction_due=True))  # stale: nothing owed
    cleared, owed = threading.Event(), threading.Event()

    def clear() -> None:
        with pg_db.transaction() as s:
            assert FairQueueRepository(s).clear_if_settled(tenant.tenant_id)
            cleared.set()
            time.sleep(0.3)  # the setter now waits for this row

    def owe() -> None:
        cleared.wait(5)
        with pg_db.transaction() as s:
            record_debt(s, tenant.tenant_id, cid, "threshold", None)
        owed.set()

    threads = [threading.Thread(target=clear), threading.Thread(target=owe)]
    for t in threads:
        t.start()
    time.sleep(0.15)
    assert not owed.is_set()  # waiting for the clearer's row lock
    for t in threads:
        t.join(10)
    assert _flagged(pg_db, tenant.tenant_id)


def test_racing_setters_and_clearers_never_leave_owed_debt_unflagged(pg_db: Database) -> None:
    """Each round: a turn owes while beat clears its tenant's stale flag, at once."""
    tenants = [new_tenant(pg_db, f"t{n}").tenant_id for n in range(4)]
    for round_ in range(25):
        _race(pg_db, {t: ingest(pg_db, t, f"r{round_}", ["hello"]) for t in tenants})
        with pg_db.session() as s:
            owing = set(
                s.scalars(select(CompactionDebt.tenant_id).where(CompactionDebt.status == PENDING))
            )
            flagged = set(s.scalars(select(Tenant.id).where(Tenant.compaction_due.is_(True))))
        assert owing == set(tenants)
        assert owing <= flagged, f"round {round_}: {owing - flagged} owe and are not flagged"
        # Every debt settles (a pass finished it): the flags go stale for the next round.
        with pg_db.transaction() as s:
            s.execute(update(CompactionDebt).values(status=DONE))


def _race(db: Database, conversations: dict[str, int]) -> None:
    """Per tenant, ``record_debt`` and ``clear_if_settled`` started together."""
    start = threading.Barrier(2 * len(conversations))
    errors: list[BaseException] = []

    def owe(tenant_id: str) -> None:
        try:
            start.wait(5)
            with db.transaction() as s:
                record_debt(s, tenant_id, conversations[tenant_id], "threshold", None)
        except BaseException as exc:
            errors.append(exc)

    def clear(tenant_id: str) -> None:
        try:
            start.wait(5)
            with db.transaction() as s:
                FairQueueRepository(s).clear_if_settled(tenant_id)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=owe, args=(t,)) for t in conversations]
    threads += [threading.Thread(target=clear, args=(t,)) for t in conversations]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert errors == []

"""Compaction is fair across tenants: a backlog of one tenant does not hold up another's.

Tenant A has 2,000 conversations owing compaction, their wake-ups queued
first; tenant B's one wake-up is queued behind all of them. A real worker
process (Redis broker, Postgres, the offline summarizer) then starts. With a
FIFO, B's first pass would come after A's 2,000; served round-robin, it comes
within the first few.
"""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from lcm.compaction.debt_statements import DONE, PENDING
from lcm.compaction.fairness_repository import FairQueueRepository
from lcm.compaction.service import record_debt
from lcm.content import IncomingMessage
from lcm.db.engine import Database
from lcm.db.models import CompactionDebt, CompactionRun, utcnow
from lcm.ingest.service import ingest_messages, prepare_batch
from lcm.tenants.service import update_overrides
from tests import servers
from tests.conftest import new_tenant

BACKLOG = 2_000
# One leaf pass per conversation: 3 messages, a fresh tail of 1, fanout 2.
ONE_PASS = {"fresh_tail_count": 1, "leaf_min_fanout": 2}
WORDS = " ".join(f"word{i}" for i in range(120))


def owe(db: Database, tenant_id: str, keys: list[str]) -> list[int]:
    """Conversations with three messages and pending debt each; their ids."""
    ids = []
    with db.transaction() as session:
        for key in keys:
            batch = prepare_batch(
                [IncomingMessage("user", f"{key} {n} {WORDS}", None) for n in range(3)],
                max_batch=3,
                max_chars=10_000,
            )
            conversation_id = ingest_messages(session, tenant_id, key, None, batch).conversation_id
            record_debt(session, tenant_id, conversation_id, "threshold", 10_000)
            ids.append(conversation_id)
    return ids


def test_one_tenants_backlog_does_not_delay_anothers_first_pass(
    pg_db: Database, celery_app: Any, worker_env: dict[str, str], workdir: Path
) -> None:
    from workers import sender

    a, b = new_tenant(pg_db, "backlog"), new_tenant(pg_db, "newcomer")
    with pg_db.transaction() as session:
        update_overrides(session, a.tenant_id, ONE_PASS)
        update_overrides(session, b.tenant_id, ONE_PASS)
    a_ids = owe(pg_db, a.tenant_id, [f"a{n}" for n in range(BACKLOG)])
    celery_app.control.purge()  # nothing left over from other modules
    for conversation_id in a_ids:
        assert sender.wake(conversation_id)

    log = workdir / "worker-fair.log"
    worker = servers.start_celery_worker(
        {**worker_env, "ANTHROPIC_API_KEY": ""}, hostname="fair", log=log
    )
    try:
        # The worker is busy with A's backlog (A has been served) when B's
        # debt arrives; B's wake-up is queued behind the rest of A's.
        deadline = time.monotonic() + 240
        while _count(pg_db, a.tenant_id, DONE) < 50:
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.1)
        [b_id] = owe(pg_db, b.tenant_id, ["b"])
        b_queued = utcnow()
        assert sender.wake(b_id)
        queued_ahead = _count(pg_db, a.tenant_id, PENDING)
        while _status(pg_db, b_id) != DONE:
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.1)
        with pg_db.read_session() as session:
            b_first = session.scalar(
                select(func.min(CompactionRun.created_at)).where(
                    CompactionRun.conversation_id == b_id
                )
            )
            assert b_first is not None
            a_before_b = session.scalar(
                select(func.count()).where(
                    CompactionRun.tenant_id == a.tenant_id,
                    CompactionRun.created_at > b_queued,
                    CompactionRun.created_at < b_first,
                )
            )
        wait = (b_first - b_queued).total_seconds()
        print(
            f"\nB's wake-up was queued behind {queued_ahead} of A's; B's first pass ran after "
            f"{a_before_b} of A's passes, {wait:.2f} s after its wake-up was queued"
        )
        assert a_before_b is not None
        assert a_before_b <= 8

        # Nothing is lost: every one of A's debts is still served (a wake-up
        # claims some pending debt, not necessarily its own).
        started = time.monotonic()
        while _count(pg_db, a.tenant_id, DONE) < BACKLOG:
            assert time.monotonic() - started < 600, log.read_text()[-3000:]
            time.sleep(1)
        took = time.monotonic() - started
        print(f"the rest of A's backlog drained in {took:.1f} s more")
        assert _count(pg_db, a.tenant_id, PENDING) == 0
    finally:
        worker.terminate()
        worker.wait(30)


def _status(db: Database, conversation_id: int) -> str | None:
    with db.read_session() as session:
        return session.scalar(
            select(CompactionDebt.status).where(CompactionDebt.conversation_id == conversation_id)
        )


def _count(db: Database, tenant_id: str, status: str) -> int:
    with db.read_session() as session:
        return int(
            session.scalar(
                select(func.count()).where(
                    CompactionDebt.tenant_id == tenant_id, CompactionDebt.status == status
                )
            )
            or 0
        )


def test_the_fair_queue_rotates_tenants_and_skips_delayed_retries(db: Database) -> None:
    tenants = [new_tenant(db, name).tenant_id for name in ("t1", "t2", "t3")]
    owed = {t: owe(db, t, [f"{t}-{n}" for n in range(3)]) for t in tenants}
    now = utcnow()
    with db.transaction() as session:
        # t3's debts are retries scheduled later: not due yet.
        session.execute(
            CompactionDebt.__table__.update()  # type: ignore[attr-defined]
            .where(CompactionDebt.tenant_id == tenants[2])
            .values(enqueued_at=now + timedelta(minutes=5))
        )
    picked = []
    for step in range(6):
        with db.transaction() as session:
            queue = FairQueueRepository(session)
            due = queue.next_due(now)
            assert due is not None
            tenant_id, conversation_id = due
            queue.mark_served(tenant_id, now + timedelta(seconds=step))
            session.execute(
                CompactionDebt.__table__.update()  # type: ignore[attr-defined]
                .where(CompactionDebt.conversation_id == conversation_id)
                .values(status="running")
            )
        picked.append((tenant_id, conversation_id))
    # Alternating between the two tenants with due debt, oldest debt first.
    assert [t for t, _ in picked] in (
        [tenants[0], tenants[1]] * 3,
        [tenants[1], tenants[0]] * 3,
    )
    assert [c for t, c in picked if t == tenants[0]] == owed[tenants[0]]
    with db.transaction() as session:
        assert FairQueueRepository(session).next_due(now) is None  # t3 only, not due
        assert FairQueueRepository(session).next_due(now + timedelta(minutes=6)) is not None


def test_racing_fair_claims_over_many_tenants_do_not_deadlock(pg_db: Database) -> None:
    """Eight workers claiming at once over 20 tenants: no deadlock, every debt claimed once.

    A losing pick used to keep its tenant row locked while picking again, so
    two workers could each hold one tenant and wait for the other's. The
    claims here are the wake-up's first step alone (no pass), so they collide.
    """
    import threading

    from lcm.compaction.engine import CompactionEngine
    from lcm.compaction.jobs import CompactionJobs
    from lcm.summarize.extractive import ExtractiveProvider
    from lcm.summarize.summarizer import Summarizer

    expected: set[int] = set()
    for n in range(20):
        tenant = new_tenant(pg_db, f"racer-{n}")
        expected |= set(owe(pg_db, tenant.tenant_id, [f"r{n}-{i}" for i in range(5)]))
    engine = CompactionEngine(
        pg_db.transaction, Summarizer(ExtractiveProvider()), reads=pg_db.lookup_session
    )
    errors: list[BaseException] = []
    claimed: list[int] = []
    start = threading.Barrier(8)
    fallback = min(expected)

    def worker(index: int) -> None:
        jobs = CompactionJobs(pg_db.transaction, engine, pg_db.settings, owner=f"w{index}")
        start.wait()
        try:
            while True:
                read = jobs.claims.claim_fairly(fallback)
                if read is None:
                    return
                claimed.append(read[0].conversation_id)
        except BaseException as exc:  # a deadlock surfaces here as OperationalError
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    assert sorted(claimed) == sorted(expected)  # each claimed exactly once


def _jobs(database: Database, owner: str) -> Any:
    from lcm.compaction.engine import CompactionEngine
    from lcm.compaction.jobs import CompactionJobs
    from lcm.summarize.extractive import ExtractiveProvider
    from lcm.summarize.summarizer import Summarizer

    engine = CompactionEngine(
        database.transaction, Summarizer(ExtractiveProvider()), reads=database.lookup_session
    )
    return CompactionJobs(database.transaction, engine, database.settings, owner=owner)


def _in_thread(target: Any, timeout: float) -> tuple[bool, list[Any]]:
    """Run ``target`` in a thread; (finished within ``timeout``, [its result or error])."""
    import threading

    out: list[Any] = []

    def run() -> None:
        try:
            out.append(target())
        except BaseException as exc:
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    return not thread.is_alive(), out


def test_a_fair_claim_does_not_wait_for_a_held_tenant_row(pg_db: Database) -> None:
    """Claims of one tenant go side by side: a held tenant row is skipped, not waited for.

    The row is held here as a concurrent claimer (or ingest charging the
    tenant's quota) holds it. A claim that stamped the tenant first used to
    wait for that transaction to end, so every claim of one tenant queued.
    """
    from lcm.db.models import Tenant

    tenant = new_tenant(pg_db, "busy")
    owed = owe(pg_db, tenant.tenant_id, [f"busy-{n}" for n in range(3)])
    jobs = _jobs(pg_db, "w1")
    with pg_db.session() as holder:
        holder.execute(select(Tenant.id).where(Tenant.id == tenant.tenant_id).with_for_update())
        finished, out = _in_thread(lambda: jobs.claims.claim_fairly(owed[-1]), timeout=10)
        holder.rollback()
    assert finished, "the claim waited for the tenant row"
    [read] = out
    claim = read[0]
    assert claim.conversation_id == owed[0]  # the oldest due debt, as before
    assert _status(pg_db, owed[0]) == "running"


def test_the_claim_commits_before_the_context_is_read(pg_db: Database, monkeypatch: Any) -> None:
    """The tenant row a claim stamps is free again while the claimed context is read.

    Ingest of the tenant (the quota charge) locks that row: reading a whole
    context under it made every turn of the tenant wait for the read.
    """
    from sqlalchemy import text
    from sqlalchemy.exc import OperationalError

    from lcm.compaction.repository import CompactionRepository

    tenant = new_tenant(pg_db, "reader")
    [owed] = owe(pg_db, tenant.tenant_id, ["reader-0"])
    seen: list[str] = []
    load = CompactionRepository.load_entries

    def load_and_probe(self: CompactionRepository, *args: Any, **kwargs: Any) -> Any:
        with pg_db.session() as probe:
            try:
                probe.execute(
                    text("SELECT id FROM tenants WHERE id = :t FOR UPDATE NOWAIT"),
                    {"t": tenant.tenant_id},
                )
                seen.append("free")
            except OperationalError:
                seen.append("held")
            probe.rollback()
        return load(self, *args, **kwargs)

    monkeypatch.setattr(CompactionRepository, "load_entries", load_and_probe)
    read = _jobs(pg_db, "w1").claims.claim_fairly(owed)
    assert read is not None
    assert read[0].conversation_id == owed
    assert seen == ["free"]


def test_a_debt_skipped_while_held_is_still_claimed_when_its_holder_rolls_back(
    pg_db: Database,
) -> None:
    """A no-wait claim that skipped a held debt does not give the wake-up up.

    One wake-up per pending debt is what makes fair claims lose nothing: had
    this wake-up settled for its own (already served) conversation because
    the only due debt was held at that instant, the debt would stay pending
    with no wake-up left for it once the holder rolled back.
    """
    import threading

    tenant = new_tenant(pg_db, "skipper")
    served, due = owe(pg_db, tenant.tenant_id, ["skipper-0", "skipper-1"])
    with pg_db.transaction() as session:
        session.execute(
            CompactionDebt.__table__.update()  # type: ignore[attr-defined]
            .where(CompactionDebt.conversation_id == served)
            .values(status=DONE)
        )
    jobs = _jobs(pg_db, "w1")
    with pg_db.session() as holder:
        holder.execute(
            select(CompactionDebt.conversation_id)
            .where(CompactionDebt.conversation_id == due)
            .with_for_update()
        )
        result: list[Any] = []
        claimer = threading.Thread(target=lambda: result.append(jobs.claims.claim_fairly(served)))
        claimer.start()
        claimer.join(1.0)
        assert claimer.is_alive(), "the wake-up gave up while the debt was held"
        holder.rollback()  # the holder's claim did not happen
    claimer.join(30)
    [read] = result
    assert read is not None
    assert read[0].conversation_id == due


def test_racing_fair_claims_of_one_tenant_claim_each_debt_once(pg_db: Database) -> None:
    """Twelve workers claiming one tenant's debts at once: each claimed exactly once, none lost."""
    import threading

    tenant = new_tenant(pg_db, "crowd")
    expected = owe(pg_db, tenant.tenant_id, [f"crowd-{n}" for n in range(60)])
    claimed: list[int] = []
    errors: list[BaseException] = []
    start = threading.Barrier(12)

    def worker(index: int) -> None:
        jobs = _jobs(pg_db, f"w{index}")
        start.wait()
        try:
            while (read := jobs.claims.claim_fairly(expected[0])) is not None:
                claimed.append(read[0].conversation_id)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    assert sorted(claimed) == sorted(expected)


def test_claims_without_waiting_serve_tenants_round_robin(db: Database) -> None:
    """The no-wait claim keeps the round: tenants in turn, each tenant's oldest debt first."""
    tenants = [new_tenant(db, name).tenant_id for name in ("r1", "r2", "r3")]
    owed = {t: owe(db, t, [f"{t}-{n}" for n in range(3)]) for t in tenants}
    jobs = _jobs(db, "w1")
    picked = [jobs.claims.claim_without_waiting() for _ in range(9)]
    assert all(c is not None for c in picked)
    order = [c.tenant_id for c in picked]
    assert order[:3] == order[3:6] == order[6:]
    assert sorted(order[:3]) == sorted(tenants)
    for t in tenants:
        assert [c.conversation_id for c in picked if c.tenant_id == t] == owed[t]
    assert jobs.claims.claim_without_waiting() is None

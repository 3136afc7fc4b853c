"""The service loop without a broker: debt, claims, fencing, retries, the reconciler.

Jobs are driven by hand here (a test plays the worker), with a clock the test
moves, so lease expiry and fencing are deterministic rather than timed.
"""

from __future__ import annotations

from datetime import timedelta

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from lcm.compaction.reconcile import overdue_debts
from lcm.compaction.steps import Step
from lcm.db.engine import Database
from lcm.db.models import CompactionDebt, Summary, SummaryMessage, utcnow
from lcm.tenants.service import IssuedKey
from tests.conftest import RecordingSender, auth
from tests.integration.service_loop import (
    BUDGET,
    Clock,
    HookedSummarizer,
    debt_of,
    drain,
    jobs_for,
    turn,
)
from tests.integration.test_compaction_engine import assert_lossless


def test_below_threshold_records_no_debt(
    client: TestClient, tenant: IssuedKey, db: Database, sender: RecordingSender
) -> None:
    out = turn(client, tenant, 2)
    assert out["compaction"] == "none"
    assert out["context_tokens"] < out["threshold_tokens"] == int(0.75 * BUDGET)
    with db.session() as s:
        assert s.scalar(select(func.count()).select_from(CompactionDebt)) == 0
    assert sender.woken == []


def test_turns_over_threshold_coalesce_into_one_debt(
    client: TestClient, tenant: IssuedKey, db: Database, sender: RecordingSender
) -> None:
    first = turn(client, tenant, 40)
    second = turn(client, tenant, 10, start=40)
    assert first["compaction"] == second["compaction"] == "scheduled"
    assert sender.woken == [first["conversation_id"]]  # one wake-up, not one per turn
    with db.session() as s:
        assert s.scalar(select(func.count()).select_from(CompactionDebt)) == 1
    assert debt_of(db, first["conversation_id"]).status == "pending"


def test_a_sweep_drains_the_debt_losslessly(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    cid = turn(client, tenant, 60)["conversation_id"]
    steps = drain(jobs_for(db, Clock(), "w1"), cid)
    assert steps[-1].action == "done"
    assert sum(1 for s in steps if s.outcome is not None) >= 2
    assert debt_of(db, cid).status == "done"
    assert_lossless(db, cid)
    status = client.get("/v1/conversations/k/status", headers=auth(tenant)).json()
    assert status["debt"]["status"] == "done"
    assert status["summaries"]["0"] >= 1
    assert status["context_tokens"] < status["threshold_tokens"]


def test_turns_during_a_sweep_rearm_one_follow_up(
    client: TestClient, tenant: IssuedKey, db: Database, sender: RecordingSender
) -> None:
    cid = turn(client, tenant, 60)["conversation_id"]
    jobs = jobs_for(db, Clock(), "w1")
    step = jobs.wake(cid)
    assert step.action == "pass"
    assert debt_of(db, cid).status == "running"
    for i in range(3):  # three turns while the sweep runs
        assert turn(client, tenant, 5, start=60 + 5 * i)["compaction"] == "scheduled"
    assert sender.woken == [cid]  # only the first turn's wake-up
    while step.action == "pass":
        assert step.fencing_token is not None
        step = jobs.run_pass(cid, step.fencing_token)
    assert step.action == "done"
    assert step.follow_up
    assert debt_of(db, cid).status == "pending"
    assert drain(jobs, cid)[-1].action == "done"
    assert debt_of(db, cid).status == "done"


def test_a_duplicate_delivery_is_a_noop(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    cid = turn(client, tenant, 60)["conversation_id"]
    jobs = jobs_for(db, Clock(), "w1")
    first = jobs.wake(cid)
    assert first.fencing_token is not None
    assert jobs.wake(cid).action == "noop"  # the lease is held
    after = jobs.run_pass(cid, first.fencing_token)
    assert jobs.run_pass(cid, first.fencing_token).action == "noop"  # same message again
    assert after.action in ("pass", "done")


def test_a_worker_whose_lease_expired_cannot_commit(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    cid = turn(client, tenant, 60)["conversation_id"]
    clock = Clock()
    taken_over: list[Step] = []
    b = jobs_for(db, clock, "worker-b")

    def stall_then_lose_the_lease() -> None:
        # Mid-"LLM call", A stalls past its lease and B claims the debt (and
        # runs its own first pass, committing it, before A gets to commit).
        clock.advance(61)
        taken_over.append(b.wake(cid))

    a = jobs_for(db, clock, "worker-a", HookedSummarizer(hook=stall_then_lose_the_lease))
    result = a.wake(cid)
    assert result.action == "noop"
    assert result.outcome is None
    step = taken_over[0]
    assert step.action == "pass"
    assert step.outcome is not None
    with db.session() as s:
        assert s.scalars(select(Summary.id)).all() == [step.outcome.summary_id]  # B's only
    while step.action == "pass":
        assert step.fencing_token is not None
        step = b.run_pass(cid, step.fencing_token)
    assert step.action == "done"
    assert_lossless(db, cid)
    with db.session() as s:
        linked = s.scalars(select(SummaryMessage.message_id)).all()
    assert len(linked) == len(set(linked))  # no message summarized twice


def test_an_expired_lease_is_rejected_even_if_nobody_took_over(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    cid = turn(client, tenant, 60)["conversation_id"]
    clock = Clock()
    a = jobs_for(db, clock, "worker-a", HookedSummarizer(hook=lambda: clock.advance(61)))
    assert a.wake(cid).action == "noop"
    with db.session() as s:
        assert s.scalar(select(func.count()).select_from(Summary)) == 0


def test_failures_retry_then_fail_then_the_next_turn_rearms(
    client: TestClient, tenant: IssuedKey, db: Database, sender: RecordingSender
) -> None:
    cid = turn(client, tenant, 60)["conversation_id"]
    jobs = jobs_for(
        db, Clock(), "w1", HookedSummarizer(fail=True), max_attempts=2, retry_base_seconds=1.0
    )
    first = drain(jobs, cid)[-1]
    assert first.action == "retry"
    assert first.countdown == 1.0
    debt = debt_of(db, cid)
    assert (debt.status, debt.attempts) == ("pending", 1)
    assert debt.last_error is not None
    assert "summarizer exploded" in debt.last_error
    assert drain(jobs, cid)[-1].action == "failed"
    status = client.get("/v1/conversations/k/status", headers=auth(tenant)).json()
    assert status["debt"]["status"] == "failed"
    assert status["debt"]["attempts"] == 2
    assert status["last_run"]["error"].startswith("RuntimeError")
    turn(client, tenant, 1, start=60)
    debt = debt_of(db, cid)
    assert (debt.status, debt.attempts) == ("pending", 0)
    assert sender.woken == [cid, cid]


def test_the_reconciler_finds_lost_wake_ups_and_expired_leases(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    lost = turn(client, tenant, 60, key="lost")["conversation_id"]
    stuck = turn(client, tenant, 60, key="stuck")["conversation_id"]
    fresh = turn(client, tenant, 60, key="fresh")["conversation_id"]
    clock = Clock()
    assert jobs_for(db, clock, "dead-worker", lease_seconds=1).wake(stuck).action == "pass"
    with db.transaction() as s:  # age the first two debts' wake-ups
        for cid in (lost, stuck):
            s.get(CompactionDebt, cid).enqueued_at = utcnow() - timedelta(minutes=5)  # type: ignore[union-attr]
            if cid == stuck:
                s.get(CompactionDebt, cid).lease_expires_at = utcnow() - timedelta(seconds=1)  # type: ignore[union-attr]
    settings = db.settings.model_copy(update={"reconcile_grace_seconds": 60})
    assert sorted(overdue_debts(db.transaction, settings)) == sorted([lost, stuck])
    assert overdue_debts(db.transaction, settings) == []  # marked: not woken twice in a row
    assert fresh not in (lost, stuck)


def test_a_turn_wakes_debt_whose_holder_died(
    client: TestClient, tenant: IssuedKey, db: Database, sender: RecordingSender
) -> None:
    """A killed worker leaves the row running; once its lease expires a turn resumes it."""
    cid = turn(client, tenant, 60)["conversation_id"]
    dead = Clock()
    dead.advance(-120)  # it claimed two minutes ago: its 60 s lease has run out
    first = jobs_for(db, dead, "killed-worker").wake(cid)
    assert first.action == "pass"
    assert first.fencing_token is not None
    assert turn(client, tenant, 4, start=60)["compaction"] == "scheduled"
    assert sender.woken == [cid, cid]  # the second wake-up is this turn's
    survivor = jobs_for(db, Clock(), "w2")
    while (last := drain(survivor, cid)[-1]).follow_up:
        pass
    assert last.action == "done"
    assert debt_of(db, cid).status == "done"
    # The dead holder's hand-over, were it delivered now, is fenced off.
    assert jobs_for(db, dead, "killed-worker").run_pass(cid, first.fencing_token).action == "noop"
    assert_lossless(db, cid)


def test_a_turn_during_a_live_lease_only_rearms(
    client: TestClient, tenant: IssuedKey, db: Database, sender: RecordingSender
) -> None:
    cid = turn(client, tenant, 60)["conversation_id"]
    assert jobs_for(db, Clock(), "w1").wake(cid).action == "pass"
    turn(client, tenant, 4, start=60)
    assert sender.woken == [cid]  # the holder is alive: its release sends the follow-up
    assert debt_of(db, cid).rearmed

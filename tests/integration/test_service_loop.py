"""The service loop without a broker: debt, claims, fencing, retries, endpoints.

Jobs are driven by hand here (a test plays the worker), with a clock the test
moves, so lease expiry and fencing are deterministic rather than timed.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from lcm.compaction.debt_repository import DebtRepository
from lcm.compaction.engine import CompactionEngine
from lcm.compaction.jobs import CompactionJobs, Step
from lcm.compaction.reconcile import overdue_debts
from lcm.compaction.service import record_debt, wait_for_debt
from lcm.completions import Completions, debt_key
from lcm.db.engine import Database
from lcm.db.models import CompactionDebt, Summary, SummaryMessage, utcnow
from lcm.ingest.content import IncomingMessage
from lcm.ingest.service import ingest_messages, prepare_batch
from lcm.summarize.extractive import ExtractiveProvider
from lcm.summarize.summarizer import Summarizer, SummaryResult
from lcm.tenants.service import IssuedKey, update_overrides
from lcm.tokens import estimate_tokens
from tests.conftest import RecordingSender, auth
from tests.integration.test_compaction_engine import assert_lossless

BUDGET = 2_000
SMALL = {"fresh_tail_count": 4, "leaf_min_fanout": 4, "leaf_chunk_tokens": 400}


class Clock:
    def __init__(self) -> None:
        self.now = utcnow()

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class HookedSummarizer(Summarizer):
    """The offline summarizer, with a hook that runs mid-"LLM call"."""

    def __init__(self, hook: Callable[[], None] | None = None, fail: bool = False) -> None:
        super().__init__(ExtractiveProvider())
        self.hook, self.fail = hook, fail

    def summarize(self, source_text: str, **kwargs: Any) -> SummaryResult:
        if self.hook is not None:
            hook, self.hook = self.hook, None
            hook()
        if self.fail:
            raise RuntimeError("summarizer exploded")
        return super().summarize(source_text, **kwargs)


def jobs_for(
    db: Database, clock: Clock, owner: str, summarizer: Summarizer | None = None, **overrides: Any
) -> CompactionJobs:
    settings = db.settings.model_copy(update={**SMALL, "lease_seconds": 60, **overrides})
    engine = CompactionEngine(db.transaction, summarizer or HookedSummarizer())
    return CompactionJobs(db.transaction, engine, settings, owner, clock=clock)


def turn(
    client: TestClient,
    tenant: IssuedKey,
    n: int,
    key: str = "k",
    start: int = 0,
    budget: int = BUDGET,
) -> dict[str, Any]:
    messages = [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "id": f"{key}-{i}",
            "content": f"message {i} about the deploy of service {i % 7} " * 8,
        }
        for i in range(start, start + n)
    ]
    r = client.post(
        f"/v1/conversations/{key}/turns",
        headers=auth(tenant),
        json={"messages": messages, "token_budget": budget},
    )
    assert r.status_code == 200, r.text
    return r.json()


def drain(jobs: CompactionJobs, conversation_id: int, limit: int = 200) -> list[Step]:
    """Play the worker: the first job (claims), then the chain of passes to the end."""
    steps = [jobs.wake(conversation_id)]
    while steps[-1].action == "pass" and len(steps) < limit:
        token = steps[-1].fencing_token
        assert token is not None
        steps.append(jobs.run_pass(conversation_id, token, position=steps[-1].position))
    return steps


def debt_of(db: Database, conversation_id: int) -> CompactionDebt:
    with db.session() as s:
        debt = DebtRepository(s).get(conversation_id)
    assert debt is not None
    return debt


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


@pytest.mark.parametrize("woken", [True, False], ids=["woken", "wake-up-lost"])
def test_wait_for_debt_answers_done_once_the_sweep_committed(
    client: TestClient, tenant: IssuedKey, db: Database, woken: bool
) -> None:
    cid = turn(client, tenant, 60)["conversation_id"]
    hub = Completions()
    asked_at = utcnow()

    def worker() -> None:
        time.sleep(0.1)
        assert drain(jobs_for(db, Clock(), "w1"), cid)[-1].action == "done"
        if woken:
            hub.notify(debt_key(cid))

    threading.Thread(target=worker).start()
    # Woken: a re-check interval past the deadline, so only the wake-up ends
    # the wait with "done". Lost: the re-check finds the committed row.
    recheck = 60.0 if woken else 0.05
    assert wait_for_debt(db.transaction, cid, asked_at, 30, hub, recheck) == "done"
    assert debt_of(db, cid).status == "done"
    assert_lossless(db, cid)


def test_wait_for_debt_meets_its_deadline_when_nothing_settles(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    cid = turn(client, tenant, 60)["conversation_id"]
    hub = Completions()
    threading.Timer(0.05, lambda: hub.notify(debt_key(cid))).start()  # a wake-up, nothing done
    started = time.monotonic()
    assert wait_for_debt(db.transaction, cid, utcnow(), 0.3, hub, 60) == "pending"
    assert 0.3 <= time.monotonic() - started < 30


def test_inline_mode_runs_the_sweep_in_the_request(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    with db.transaction() as s:
        update_overrides(s, tenant.tenant_id, {"compaction_mode": "inline", **SMALL})
    out = turn(client, tenant, 60)
    assert out["compaction"] == "ran"
    assert debt_of(db, out["conversation_id"]).status == "done"
    assert_lossless(db, out["conversation_id"])


def test_assemble_and_manual_compact_endpoints(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    with db.transaction() as s:
        update_overrides(s, tenant.tenant_id, {"compaction_mode": "inline", **SMALL})
    turn(client, tenant, 30, budget=1_000_000)  # far below threshold: nothing compacts
    r = client.post(
        "/v1/conversations/k/compact",
        headers=auth(tenant),
        json={"target_tokens": 500, "token_budget": BUDGET, "wait": True},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "done"
    assert body["context_tokens_after"] < body["context_tokens_before"]
    a = client.post(
        "/v1/conversations/k/assemble", headers=auth(tenant), json={"token_budget": BUDGET}
    ).json()
    assert a["summary_count"] >= 1
    assert a["fresh_tail_count"] == 4
    assert a["estimated_tokens"] <= BUDGET
    assert a["messages"][0]["role"] == "user"
    assert (
        client.post(
            "/v1/conversations/nope/assemble", headers=auth(tenant), json={"token_budget": 100}
        ).status_code
        == 404
    )


def test_manual_compact_without_a_worker_reports_pending(
    client: TestClient, tenant: IssuedKey, sender: RecordingSender
) -> None:
    cid = turn(client, tenant, 10, budget=1_000_000)["conversation_id"]
    r = client.post("/v1/conversations/k/compact", headers=auth(tenant), json={"wait": 0.3})
    assert r.json()["status"] == "pending"
    assert sender.woken == [cid]


def test_tenant_settings_endpoint(client: TestClient, tenant: IssuedKey) -> None:
    r = client.patch(
        "/v1/tenant/settings",
        headers=auth(tenant),
        json={"fresh_tail_count": 12, "custom_instructions": "Keep ticket ids."},
    )
    assert r.status_code == 200
    assert r.json()["effective"]["fresh_tail_count"] == 12
    bad = client.patch("/v1/tenant/settings", headers=auth(tenant), json={"fresh_tail_count": 0})
    assert bad.status_code == 400
    unknown = client.patch("/v1/tenant/settings", headers=auth(tenant), json={"database_url": "x"})
    refused = unknown.json()["error"]["message"]
    assert unknown.status_code == 400
    assert "database_url: unknown field" in refused
    cleared = client.patch(
        "/v1/tenant/settings", headers=auth(tenant), json={"fresh_tail_count": None}
    )
    assert cleared.json()["overrides"] == {"custom_instructions": "Keep ticket ids."}


def test_record_debt_is_one_row_per_conversation(db: Database, tenant: IssuedKey) -> None:
    from lcm.ingest.content import IncomingMessage
    from tests.integration.test_ingest import ingest

    cid = ingest(db, tenant.tenant_id, "k", [IncomingMessage("user", "x")]).conversation_id
    with db.transaction() as s:
        assert record_debt(s, tenant.tenant_id, cid, "threshold", 100) is True
    with db.transaction() as s:
        assert record_debt(s, tenant.tenant_id, cid, "manual", 100, 50) is False
    debt = debt_of(db, cid)
    assert (debt.reason, debt.target_tokens, debt.status) == ("manual", 50, "pending")


@pytest.mark.parametrize("budget", [0, -5])
def test_turn_budget_must_be_positive(client: TestClient, tenant: IssuedKey, budget: int) -> None:
    r = client.post(
        "/v1/conversations/k/turns",
        headers=auth(tenant),
        json={"messages": [], "token_budget": budget},
    )
    assert r.status_code == 400


def test_a_job_of_the_wrong_kind_hands_the_lease_over(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    cid = turn(client, tenant, 60)["conversation_id"]
    jobs = jobs_for(db, Clock(), "w1")
    handoff = jobs.wake(cid, kind="condensed")  # the first pass due is a leaf pass
    assert (handoff.action, handoff.kind, handoff.outcome) == ("pass", "leaf", None)
    assert handoff.fencing_token is not None
    ran = jobs.run_pass(cid, handoff.fencing_token, kind="leaf")
    assert ran.outcome is not None
    assert ran.outcome.kind == "leaf"


class EverySecondSummarySavesNothing(Summarizer):
    """Offline summaries, but every second one is its whole source (no smaller)."""

    def __init__(self) -> None:
        super().__init__(ExtractiveProvider())
        self.calls = 0

    def summarize(self, source_text: str, **kwargs: Any) -> SummaryResult:
        self.calls += 1
        if self.calls % 2 == 0:
            tokens = estimate_tokens(source_text)
            return SummaryResult(source_text, tokens, "normal", "echo", ())
        return super().summarize(source_text, **kwargs)


@pytest.mark.parametrize("max_rounds", [1, 3])
def test_the_service_chain_honours_max_rounds(
    client: TestClient, db: Database, tenant: IssuedKey, max_rounds: int
) -> None:
    """A pass saving nothing ends a round; under pressure another starts, max_rounds in all."""
    summarizer = EverySecondSummarySavesNothing()
    jobs = jobs_for(db, Clock(), "w", summarizer, max_rounds=max_rounds)
    cid = turn(client, tenant, 120)["conversation_id"]
    with db.transaction() as s:
        # A manual request down to 0 tokens: the context stays "over target" throughout.
        record_debt(s, tenant.tenant_id, cid, "manual", BUDGET, target_tokens=0)
    steps = drain(jobs, cid)
    passes = [step for step in steps if step.outcome is not None]
    assert steps[-1].action == "done"
    assert len(passes) == 2 * max_rounds  # each round: one pass that saves, one that does not
    last = steps[-2].position
    assert last is not None
    assert last.round == max_rounds
    assert debt_of(db, cid).status == "done"
    assert_lossless(db, cid)


def test_the_reconciler_ends_leases_of_dead_processes_on_this_host(
    db: Database, tenant: IssuedKey
) -> None:
    """A killed holder's lease is not waited out: its pid is gone, the debt is woken now."""
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    dead_pid = int(gone.stdout)
    host = socket.gethostname()
    owners = {
        f"worker:{host}:{dead_pid}": True,  # dead process on this host: woken now
        f"worker:{host}:{os.getpid()}": False,  # alive: its lease stands
        f"worker:other-host:{dead_pid}": False,  # another host: only its lease expiry counts
    }
    woken_expected = []
    for n, (owner, woken) in enumerate(owners.items()):
        with db.transaction() as s:
            batch = prepare_batch([IncomingMessage("user", "hello")], max_batch=1, max_chars=100)
            cid = ingest_messages(s, tenant.tenant_id, f"k{n}", None, batch).conversation_id
            record_debt(s, tenant.tenant_id, cid, "threshold", BUDGET)
        with db.transaction() as s:
            claim = DebtRepository(s).claim(cid, owner, utcnow(), timedelta(seconds=300))
            assert claim is not None
        if woken:
            woken_expected.append(cid)
    settings = db.settings.model_copy(update={"reconcile_grace_seconds": 0.0})
    assert overdue_debts(db.transaction, settings) == woken_expected


def test_a_release_racing_a_turn_that_rearms_keeps_the_follow_up(pg_db: Database) -> None:
    """Release is one conditional UPDATE: a turn holding the debt row makes it wait, then see it.

    The turn (``record_debt``) locks the debt row and marks it re-armed; the
    release that runs meanwhile waits for that lock and must then hand the
    row back as pending (a follow-up), not done. In the other order the turn
    finds the row done and makes it pending itself (covered by the test
    above); either way no turn's debt is lost.
    """
    from lcm.tenants.service import create_tenant

    with pg_db.transaction() as s:
        tenant_id = create_tenant(s, "racer").tenant_id
        batch = prepare_batch(
            [IncomingMessage("user", f"m{i} " * 50) for i in range(12)],
            max_batch=12,
            max_chars=10**6,
        )
        cid = ingest_messages(s, tenant_id, "race", None, batch).conversation_id
        record_debt(s, tenant_id, cid, "threshold", BUDGET)
    clock = Clock()
    with pg_db.transaction() as s:
        claim = DebtRepository(s).claim(cid, "w1", clock(), timedelta(seconds=60))
    assert claim is not None
    released: list[bool] = []
    with pg_db.session() as turn_session:
        record_debt(turn_session, tenant_id, cid, "threshold", BUDGET)  # holds the row
        releaser = threading.Thread(
            target=lambda: released.append(
                _release(pg_db, claim, clock())  # waits for the turn's row lock
            )
        )
        releaser.start()
        releaser.join(1.0)
        assert releaser.is_alive(), "the release did not wait for the turn's row lock"
        turn_session.commit()
    releaser.join(30)
    assert released == [True]
    debt = debt_of(pg_db, cid)
    assert debt.status == "pending"
    assert not debt.rearmed


def _release(db: Database, claim: Any, now: datetime) -> bool:
    with db.transaction() as s:
        return DebtRepository(s).release(claim, now)


def test_a_single_pass_sweep_takes_few_statements_and_commits(
    db: Database, tenant: IssuedKey
) -> None:
    """A wake-up that runs the sweep's one pass, as a worker runs it.

    The claim (stamp the tenant, claim its debt) commits alone; the read
    (settings, context) is its own short transaction; the pass's commit is
    the version bump, the fence, the range swap with the pass's rows (one
    statement on Postgres) and the release of the lease.
    """
    from sqlalchemy import event

    batch = [
        IncomingMessage("user" if i % 2 == 0 else "assistant", f"step {i} " * 40) for i in range(8)
    ]
    with db.transaction() as s:
        cid = ingest_messages(
            s,
            tenant.tenant_id,
            "one-pass",
            None,
            prepare_batch(batch, max_batch=10, max_chars=10**6),
        ).conversation_id
        record_debt(s, tenant.tenant_id, cid, "threshold", 400)
    jobs = jobs_for(db, Clock(), "counter")
    statements: list[str] = []
    commits: list[int] = []

    def count(*args: object) -> None:
        sql = str(args[2])
        if not sql.startswith(("PRAGMA", "BEGIN", "SAVEPOINT", "RELEASE")):
            statements.append(sql)

    def commit(*_args: object) -> None:
        commits.append(1)

    event.listen(db.engine, "before_cursor_execute", count)
    event.listen(db.engine, "commit", commit)
    try:
        step = jobs.wake_fairly(cid, "leaf")
    finally:
        event.remove(db.engine, "before_cursor_execute", count)
        event.remove(db.engine, "commit", commit)
    assert step.action == "done", step
    assert step.outcome is not None
    assert step.outcome.kind == "leaf"
    expected = 8 if db.dialect == "postgresql" else 13
    assert len(statements) == expected, statements
    assert len(commits) == 3

"""Sweep chains on the service loop: lease hand-over, rounds, dead holders, races, cost."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from datetime import datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from lcm.compaction.debt_repository import DebtRepository
from lcm.compaction.reconcile import overdue_debts
from lcm.compaction.service import record_debt
from lcm.content import IncomingMessage
from lcm.db.engine import Database
from lcm.db.models import utcnow
from lcm.ingest.service import ingest_messages, prepare_batch
from lcm.summarize.extractive import ExtractiveProvider
from lcm.summarize.summarizer import Summarizer, SummaryResult
from lcm.tenants.service import IssuedKey
from lcm.tokens import estimate_tokens
from tests.integration.service_loop import (
    BUDGET,
    Clock,
    debt_of,
    drain,
    jobs_for,
    turn,
)
from tests.integration.test_compaction_engine import assert_lossless


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
    # Two short reads of their own beside the pass: the chain's first pass
    # looks for pending summary surgery, and a leaf pass reads its messages'
    # secret spans (the model never sees a secret). One statement and one
    # commit each.
    expected = 10 if db.dialect == "postgresql" else 15
    assert len(statements) == expected, statements
    assert len(commits) == 5, statements

"""The service loop end to end: real Celery worker processes, Redis, Postgres, a fake LLM.

Workers here are separate ``celery worker`` processes with their own
settings (small chunks, a short lease), summarizing through the real
Anthropic SDK against the fake Messages API server in this process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from api.app import create_app
from lcm.db.engine import Database
from lcm.db.models import CompactionDebt, CompactionRun, Summary, SummaryMessage
from lcm.tenants.service import IssuedKey
from tests import servers
from tests.conftest import auth, new_tenant
from tests.fakes import FakeAnthropicServer
from tests.integration.test_compaction_engine import assert_lossless
from workers.link import CeleryLink
from workers.sender import CelerySender

pytestmark = pytest.mark.celery

LOOP_ENV = {
    "LCM_FRESH_TAIL_COUNT": "4",
    "LCM_LEAF_MIN_FANOUT": "4",
    "LCM_LEAF_CHUNK_TOKENS": "400",
    "LCM_LEASE_SECONDS": "4",
    "LCM_RECONCILE_GRACE_SECONDS": "1",
    "LCM_RECONCILE_INTERVAL_SECONDS": "1",
    "LCM_LLM_MAX_RETRIES": "1",
    "LCM_LLM_TIMEOUT_SECONDS": "60",
    "ANTHROPIC_API_KEY": "sk-test",
}
BUDGET = 1_500


@pytest.fixture(scope="module")
def fake_llm() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as server:
        yield server


@pytest.fixture
def llm(fake_llm: FakeAnthropicServer) -> FakeAnthropicServer:
    fake_llm.set_default("ok")
    return fake_llm


class Workers:
    """Starts and stops worker (and beat) processes for one test."""

    def __init__(self, env: dict[str, str], logs: Path) -> None:
        self.env, self.logs = env, logs
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(self, count: int, concurrency: int = 4) -> list[subprocess.Popen[bytes]]:
        started = [
            servers.start_celery_worker(
                self.env,
                concurrency=concurrency,
                hostname=f"loop{len(self.processes) + i}",
                log=self.logs / f"worker{len(self.processes) + i}.log",
            )
            for i in range(count)
        ]
        self.processes += started
        return started

    def start_beat(self) -> subprocess.Popen[bytes]:
        with (self.logs / "beat.log").open("wb") as out:
            beat = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "workers.main",
                    "beat",
                    "--loglevel=INFO",
                    f"--schedule={self.logs / 'beat-schedule'}",
                ],
                env={**os.environ, **self.env},
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.processes.append(beat)
        return beat

    def stop(self) -> None:
        for p in self.processes:
            if p.poll() is None:
                p.terminate()
        for p in self.processes:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()

    def tail(self) -> str:
        return "\n".join(f.read_text()[-1500:] for f in sorted(self.logs.glob("*.log")))


@pytest.fixture
def workers(
    worker_env: dict[str, str],
    llm: FakeAnthropicServer,
    celery_app: Any,
    redis_server: servers.RedisHandle,
    tmp_path: Path,
    pg_db: Database,
) -> Iterator[Workers]:
    """The worker processes of one test (no other worker consumes meanwhile)."""
    redis.Redis.from_url(redis_server.url).flushall()  # nothing left from earlier tests
    env = {**worker_env, **LOOP_ENV, "LCM_ANTHROPIC_BASE_URL": llm.base_url}
    pool = Workers(env, tmp_path)
    yield pool
    pool.stop()


@pytest.fixture
def api(pg_db: Database) -> Iterator[TestClient]:
    settings = pg_db.settings.model_copy(
        update={"fresh_tail_count": 4, "leaf_min_fanout": 4, "leaf_chunk_tokens": 400}
    )
    app = create_app(
        settings, link=CeleryLink(), database=pg_db, broker_ping=lambda: True, sender=CelerySender()
    )
    with TestClient(app) as client:
        yield client


def post_turn(api: TestClient, tenant: IssuedKey, key: str, start: int, n: int) -> str:
    messages = [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "id": f"{key}-{i}",
            "content": f"turn {i} of {key}: we changed config/app.yaml and reran tests " * 6,
        }
        for i in range(start, start + n)
    ]
    r = api.post(
        f"/v1/conversations/{key}/turns",
        headers=auth(tenant),
        json={"messages": messages, "token_budget": BUDGET},
    )
    assert r.status_code == 200, r.text
    return str(r.json()["compaction"])


def wait_until(
    condition: Callable[[], bool], timeout: float, what: str, logs: Callable[[], str] = lambda: ""
) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}\n{logs()}")
        time.sleep(0.2)


def debt_statuses(db: Database) -> dict[str, int]:
    with db.session() as s:
        rows = s.execute(
            select(CompactionDebt.status, func.count()).group_by(CompactionDebt.status)
        ).all()
    return {status: int(n) for status, n in rows}


def all_done(db: Database, expected: int) -> Callable[[], bool]:
    return lambda: debt_statuses(db) == {"done": expected}


def runs_per_conversation(db: Database) -> dict[int, int]:
    with db.session() as s:
        rows = s.execute(
            select(CompactionRun.conversation_id, func.count()).group_by(
                CompactionRun.conversation_id
            )
        ).all()
    return {int(c): int(n) for c, n in rows}


def assert_each_range_replaced_once(db: Database) -> None:
    with db.session() as s:
        linked = s.scalars(select(SummaryMessage.message_id)).all()
        summaries = s.scalar(select(func.count()).select_from(Summary))
        runs = s.scalar(
            select(func.count()).select_from(CompactionRun).where(CompactionRun.error.is_(None))
        )
    assert len(linked) == len(set(linked)), "a message was linked into two leaf summaries"
    assert summaries == runs, "a committed pass without its summary, or the reverse"


def test_four_workers_drain_200_conversations(
    pg_db: Database, workers: Workers, api: TestClient
) -> None:
    tenant = new_tenant(pg_db)
    # Sixteen pool processes on two shared cores: a pass can outlive the
    # module's 4 s lease (kept short for the kill tests), and its summary is
    # then dropped by the fence. Recovering that is the reconciler's job, as
    # in any scaled deployment, so beat runs; the longer lease keeps this
    # test about draining, not about recovery (the kill tests cover that).
    workers.env["LCM_LEASE_SECONDS"] = "30"
    workers.start(4, concurrency=4)
    workers.start_beat()
    keys = [f"conv-{i}" for i in range(200)]
    errors: list[BaseException] = []

    def traffic(chunk: list[str]) -> None:
        try:
            for round_ in range(2):
                for key in chunk:
                    post_turn(api, tenant, key, round_ * 8, 8)
        except BaseException as exc:  # asserted below
            errors.append(exc)

    threads = [threading.Thread(target=traffic, args=(keys[i::8],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    wait_until(all_done(pg_db, 200), 200, "200 debts to drain", workers.tail)
    with pg_db.session() as s:
        conversations = s.scalars(select(CompactionDebt.conversation_id)).all()
    for cid in conversations:
        assert_lossless(pg_db, cid)
    assert_each_range_replaced_once(pg_db)


def test_a_killed_worker_is_recovered_after_its_lease(
    pg_db: Database, workers: Workers, api: TestClient, llm: FakeAnthropicServer
) -> None:
    tenant = new_tenant(pg_db)
    victim, survivor = workers.start(2, concurrency=2)
    workers.start_beat()
    seen = len(llm.requests)
    llm.script(["latency:30"])  # the first summary request hangs
    assert post_turn(api, tenant, "slow", 0, 24) == "scheduled"
    wait_until(lambda: len(llm.requests) > seen, 30, "the slow LLM call", workers.tail)
    with pg_db.session() as s:
        debt = s.scalar(select(CompactionDebt))
    assert debt is not None
    assert debt.status == "running"
    assert debt.lease_owner
    holder = int(debt.lease_owner.rsplit(":", 1)[1])
    os.kill(holder, signal.SIGKILL)  # whichever worker holds the lease dies mid-pass
    wait_until(all_done(pg_db, 1), 90, "another worker to finish the debt", workers.tail)
    assert_lossless(pg_db, debt.conversation_id)
    assert_each_range_replaced_once(pg_db)
    assert holder in (victim.pid, survivor.pid)


def test_fairness_one_long_sweep_does_not_starve_others(
    pg_db: Database, workers: Workers, api: TestClient, llm: FakeAnthropicServer
) -> None:
    tenant = new_tenant(pg_db)
    llm.set_default("latency:0.05")
    workers.start(1, concurrency=1)  # one slot: the queue order alone decides
    assert post_turn(api, tenant, "big", 0, 220) == "scheduled"
    for i in range(20):
        assert post_turn(api, tenant, f"small-{i}", 0, 16) == "scheduled"
    wait_until(
        all_done(pg_db, 21),
        180,
        "all debts",
        lambda: f"{debt_statuses(pg_db)} {runs_per_conversation(pg_db)}\n{workers.tail()}",
    )
    with pg_db.session() as s:
        big = s.scalar(
            select(CompactionDebt.conversation_id)
            .join(CompactionRun, CompactionRun.conversation_id == CompactionDebt.conversation_id)
            .group_by(CompactionDebt.conversation_id)
            .order_by(func.count().desc())
            .limit(1)
        )
        big_runs = s.scalars(
            select(CompactionRun.created_at)
            .where(CompactionRun.conversation_id == big)
            .order_by(CompactionRun.id)
        ).all()
        firsts = s.execute(
            select(CompactionRun.conversation_id, func.min(CompactionRun.created_at))
            .where(CompactionRun.conversation_id != big)
            .group_by(CompactionRun.conversation_id)
        ).all()
    assert len(big_runs) >= 50
    assert len(firsts) == 20
    # Every other conversation had its first pass before the big one was 10 passes in.
    assert max(first for _, first in firsts) < big_runs[9]


def test_reconciler_recovers_debts_after_redis_is_flushed(
    pg_db: Database, workers: Workers, api: TestClient, redis_server: servers.RedisHandle
) -> None:
    tenant = new_tenant(pg_db)
    client = redis.Redis.from_url(redis_server.url)
    # No worker runs yet: the wake-ups wait in Redis and are lost with its data.
    for i in range(10):
        post_turn(api, tenant, f"lost-{i}", 0, 24)
    client.flushall()
    workers.start(1, concurrency=4)
    workers.start_beat()
    wait_until(all_done(pg_db, 10), 90, "the reconciler to recover 10 debts", workers.tail)
    assert_each_range_replaced_once(pg_db)


def test_doctor_apply_repairs_on_a_worker_once_the_llm_is_back(
    pg_db: Database, workers: Workers, api: TestClient, llm: FakeAnthropicServer
) -> None:
    tenant = new_tenant(pg_db)
    workers.env["LCM_LLM_BREAKER_RESET_SECONDS"] = "0.5"  # closes again soon after the outage
    workers.start(1, concurrency=2)
    llm.set_default("500")
    assert post_turn(api, tenant, "outage", 0, 30) == "scheduled"
    wait_until(all_done(pg_db, 1), 60, "the sweep during the outage", workers.tail)

    def degraded() -> set[str]:
        with pg_db.session() as s:
            return set(s.scalars(select(Summary.id).where(Summary.degraded.is_not(None))))

    broken = degraded()
    assert broken
    with pg_db.session() as s:
        before = set(s.scalars(select(Summary.id)))
        cid = s.scalars(select(Summary.conversation_id)).first()
    assert cid is not None
    llm.set_default("ok")
    time.sleep(0.6)
    r = api.post("/v1/tenant/doctor/apply", json={}, headers=auth(tenant))
    assert r.status_code == 200, r.text
    assert r.json() == {"status": "scheduled", "conversations": [cid], "repaired": []}
    wait_until(lambda: not degraded() and all_done(pg_db, 1)(), 60, "the repair job", workers.tail)
    with pg_db.session() as s:
        after = {row.id: row for row in s.scalars(select(Summary))}
    assert before <= set(after)
    assert all(after[sid].model != "truncation" for sid in broken)
    logs = "".join(f.read_text() for f in workers.logs.glob("*.log"))
    assert "Task compaction.repair" in logs  # the repair ran as its own task kind
    assert_lossless(pg_db, cid)


def test_passes_taking_turns_still_wait_for_the_model_together(
    pg_db: Database, workers: Workers, api: TestClient
) -> None:
    # One turn per worker process (lcm/turns.py): the passes' Python work
    # takes turns, but each gives its turn up while the model answers, so
    # four pool threads still have four summaries in flight at once. The
    # model answers the first four together, so their commits queue.
    tenant = new_tenant(pg_db)
    port = servers.free_port()
    with FakeAnthropicServer(default="latency:1.5") as slow:
        slow.gather(4)
        workers.env.update(
            {
                "LCM_WORKER_PASS_SLOTS": "1",
                "LCM_WORKER_METRICS_PORT": str(port),
                "LCM_ANTHROPIC_BASE_URL": slow.base_url,
            }
        )
        workers.start(1, concurrency=4)
        for i in range(4):
            assert post_turn(api, tenant, f"turns-{i}", 0, 24) == "scheduled"
        wait_until(all_done(pg_db, 4), 90, "four debts", workers.tail)
        assert slow.peak_in_flight == 4
        summaries = len(slow.requests)
    scrape = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    samples = {
        line.split(" ")[0]: float(line.split(" ")[1])
        for line in scrape.splitlines()
        if line.startswith("lcm_worker_turn")
    }
    # A turn when each task started, and one more after each model reply.
    assert samples["lcm_worker_turns_total"] >= 4 + summaries
    assert samples["lcm_worker_turns_waiting"] == 0
    assert samples["lcm_worker_turn_waits_total"] >= 1
    assert samples["lcm_worker_turn_wait_seconds_total"] > 0


def test_a_worker_logs_each_job_only_when_asked(
    pg_db: Database, workers: Workers, api: TestClient
) -> None:
    tenant = new_tenant(pg_db)
    logs = {}
    for n, log_jobs in enumerate(("false", "true")):
        workers.env["LCM_LOG_JOBS"] = log_jobs
        (worker,) = workers.start(1, concurrency=2)
        assert post_turn(api, tenant, f"logged-{log_jobs}", 0, 24) == "scheduled"
        wait_until(all_done(pg_db, n + 1), 60, "the compaction", workers.tail)
        servers.stop_process(worker, 15)
        logs[log_jobs] = (workers.logs / f"worker{n}.log").read_text()
    per_job = ("compaction.leaf[", "HTTP Request: POST")
    assert " ready." in logs["false"]  # the worker's own INFO lines stay
    assert not [line for line in per_job if line in logs["false"]], logs["false"][-3000:]
    assert all(line in logs["true"] for line in per_job), logs["true"][-3000:]

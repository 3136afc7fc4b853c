"""expand-query over HTTP: one running call per session (409 ``expansion_busy``), the breakdown.

On Postgres with a real Celery worker process (the API and the worker are
separate processes: the lease is a database row), and on ``lcm serve``
(SQLite, the in-process worker). The loop talks to the fake Messages API.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from lcm.db.engine import Database
from lcm.db.models import ExpansionLease, Tenant, utcnow
from lcm.settings import Settings
from lcm.tenants.service import IssuedKey
from tests import servers
from tests.conftest import auth, new_tenant
from tests.fakes import Behaviour, FakeAnthropicServer
from tests.integration.retrieval_data import ingest

FAMILY = "agent:main"
BODY = {"prompt": "What was the zebra plan?", "query": "zebra migration", "session_key": FAMILY}
TEXTS = ["the zebra migration moves to region b", "noted: zebra migration on friday"]

Post = Callable[[dict[str, Any]], httpx.Response]


@pytest.fixture(scope="module")
def module_llm() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as server:
        yield server


@pytest.fixture(scope="module")
def llm_worker(
    celery_app: object, worker_env: dict[str, str], workdir: Path, module_llm: FakeAnthropicServer
) -> Iterator[None]:
    """A real worker process whose expand-query loop calls the fake Messages API."""
    from workers.tasks.system import ping

    env = {
        **worker_env,
        "ANTHROPIC_API_KEY": "sk-test",
        "LCM_ANTHROPIC_BASE_URL": module_llm.base_url,
        "LCM_LLM_MAX_RETRIES": "0",
    }
    log = workdir / "worker-expand-busy.log"
    process = servers.start_celery_worker(env, log=log, hostname="busy")
    try:
        ping.apply_async(queue="compaction").get(timeout=60)
        yield
    finally:
        servers.stop_process(process)


@pytest.fixture
def pg_api(llm_worker: None, pg_db: Database) -> Iterator[TestClient]:
    from api.app import create_app
    from workers.link import CeleryLink

    app = create_app(pg_db.settings, link=CeleryLink(), database=pg_db, broker_ping=lambda: True)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def leases(db: Database) -> int:
    with db.session() as s:
        return int(s.scalar(select(func.count()).select_from(ExpansionLease)) or 0)


def put_lease(db: Database, tenant_id: str, *, expires_in: float) -> None:
    """A lease as a crashed (or still running) API process elsewhere left it."""
    with db.transaction() as s:
        s.query(ExpansionLease).delete()
        s.add(
            ExpansionLease(
                tenant_id=tenant_id,
                session=FAMILY,
                owner="grant_elsewhere",
                expires_at=utcnow() + timedelta(seconds=expires_in),
            )
        )


def race_then_recover(post: Post, llm: FakeAnthropicServer, db: Database, tenant_id: str) -> None:
    """Two calls at once: one runs, one is refused; then the session is free again."""
    llm.set_default(Behaviour.ok(delay=1.5))  # the first call is still running
    before = len(llm.requests)
    barrier = threading.Barrier(2)
    answers: list[httpx.Response] = []

    def call() -> None:
        barrier.wait()
        answers.append(post(BODY))

    threads = [threading.Thread(target=call) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(r.status_code for r in answers) == [200, 409], [r.text for r in answers]
    refused = next(r for r in answers if r.status_code == 409)
    assert refused.json()["error"]["code"] == "expansion_busy"
    assert refused.json()["error"]["message"]
    ran = next(r for r in answers if r.status_code == 200).json()
    assert ran["offline"] is False
    assert ran["conversations"][0]["status"] == "answered"
    assert len(llm.requests) - before == 1  # the refused call never reached the model
    assert leases(db) == 0  # released on completion
    llm.set_default(Behaviour.ok())
    third = post(BODY)
    assert third.status_code == 200, third.text
    # A live lease held elsewhere (another API process) refuses; an expired one does not.
    put_lease(db, tenant_id, expires_in=60)
    assert post(BODY).status_code == 409
    put_lease(db, tenant_id, expires_in=-1)
    after_crash = post(BODY)
    assert after_crash.status_code == 200, after_crash.text
    assert leases(db) == 0


def failure_releases(post: Post, llm: FakeAnthropicServer, db: Database) -> None:
    """A call whose model fails answers 503 and leaves the session free."""
    llm.set_default(Behaviour.error(500))
    failed = post(BODY)
    assert failed.status_code == 503, failed.text
    assert failed.json()["error"]["code"] == "summarizer_error"
    assert leases(db) == 0
    llm.set_default(Behaviour.ok())


def breakdown_over_http(post: Post, conversation_ids: list[int], most_ms: int) -> None:
    r = post({**BODY, "timeout_ms": 3_600_000})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["timeout_ms"] == most_ms  # capped by the server's maximum
    assert out["source_conversation_ids"] == conversation_ids
    assert out["truncated"] is False
    entry = out["conversations"][0]
    assert set(entry) == {
        "conversation_id",
        "session_key",
        "status",
        "score",
        "elapsed_ms",
        "tokens",
        "error",
    }
    assert entry["session_key"] == FAMILY
    assert entry["error"] is None
    bad = post({**BODY, "timeout_ms": 0})
    assert bad.status_code == 400
    assert bad.json()["error"]["code"]


@pytest.mark.celery
def test_expand_query_busy_on_postgres_with_a_worker_process(
    pg_api: TestClient, pg_db: Database, module_llm: FakeAnthropicServer
) -> None:
    tenant: IssuedKey = new_tenant(pg_db)
    cid = ingest(pg_db, tenant.tenant_id, FAMILY, TEXTS)

    def post(body: dict[str, Any]) -> Any:  # the test client's response type
        return pg_api.post("/v1/expand-query", json=body, headers=auth(tenant))

    race_then_recover(post, module_llm, pg_db, tenant.tenant_id)
    most = round(pg_db.settings.expand_query_timeout_seconds * 1000)
    breakdown_over_http(post, [cid], most)
    failure_releases(post, module_llm, pg_db)


def test_expand_query_busy_on_lcm_serve(tmp_path: Path) -> None:
    home = tmp_path / "home"
    url, key = servers.embedded_home(home, "busy")
    with FakeAnthropicServer() as llm:
        env = {
            "LCM_HOME": str(home),
            "ANTHROPIC_API_KEY": "sk-test",
            "LCM_ANTHROPIC_BASE_URL": llm.base_url,
            "LCM_LLM_MAX_RETRIES": "0",
            "LCM_EXPAND_QUERY_TIMEOUT_SECONDS": "30",
        }
        serve = servers.start_serve(env, log=tmp_path / "serve.log")
        db = Database(Settings(database_url=url, broker_url="memory://"))
        try:
            with httpx.Client(
                base_url=serve.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=60
            ) as http:
                messages = [{"role": "user", "content": text} for text in TEXTS]
                stored = http.post(
                    f"/v1/conversations/{FAMILY}/messages", json={"messages": messages}
                )
                assert stored.status_code == 200, stored.text
                with db.session() as s:
                    tenant_id = str(s.scalar(select(Tenant.id).where(Tenant.name == "busy")))

                def post(body: dict[str, Any]) -> httpx.Response:
                    return http.post("/v1/expand-query", json=body)

                race_then_recover(post, llm, db, tenant_id)
                breakdown_over_http(post, [stored.json()["conversation_id"]], 30_000)
                failure_releases(post, llm, db)
        finally:
            db.dispose()
            serve.stop()

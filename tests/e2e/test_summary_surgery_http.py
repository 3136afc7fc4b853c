"""Summary surgery over HTTP, run by real workers, the LLM being the fake Messages API.

On Postgres the API runs in this process and a real Celery worker process
runs the jobs; on SQLite ``lcm serve`` runs the API and its in-process
worker (the embedded mode). The same scenario runs on both.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from lcm.db.engine import Database
from lcm.db.models import ContextItem, Summary, SummaryMessage, SummaryParent
from lcm.tenants.service import IssuedKey
from tests import servers
from tests.conftest import auth, new_tenant
from tests.fakes import FakeAnthropicServer
from tests.fakes.anthropic_script import Behaviour
from tests.integration.test_compaction_engine import assert_lossless
from tests.integration.test_summary_surgery import assert_tokens_consistent

MODEL = "claude-test"
KEY = "agent:main:surgery"
TENANT_SETTINGS: dict[str, Any] = {
    "summary_model": MODEL,
    "fresh_tail_count": 6,
    "leaf_min_fanout": 4,
    "leaf_chunk_tokens": 600,
    "condensed_min_fanout": 3,
    "summary_prefix_target_tokens": 100,
}


class Http(Protocol):
    def get(self, url: str, *, headers: dict[str, str]) -> Any: ...
    def post(self, url: str, *, json: Any, headers: dict[str, str]) -> Any: ...
    def patch(self, url: str, *, json: Any, headers: dict[str, str]) -> Any: ...


def llm_env(llm: FakeAnthropicServer) -> dict[str, str]:
    return {
        "ANTHROPIC_API_KEY": "sk-test",
        "LCM_ANTHROPIC_BASE_URL": llm.base_url,
        "LCM_LLM_MAX_RETRIES": "0",
    }


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as server:
        yield server


@pytest.fixture(scope="module")
def llm_worker(
    celery_app: object, worker_env: dict[str, str], llm: FakeAnthropicServer, workdir: Path
) -> Iterator[None]:
    """A real Celery worker process whose summarizer is the fake LLM."""
    from workers.tasks.system import ping

    log = workdir / "worker-surgery.log"
    process = servers.start_celery_worker(
        {**worker_env, **llm_env(llm)}, hostname="surgery", log=log
    )
    try:
        ping.apply_async(queue="compaction").get(timeout=60)
    except Exception:
        process.kill()
        pytest.fail("the Celery worker did not answer a ping:\n" + log.read_text()[-4000:])
    yield
    servers.stop_process(process)


def words(i: int) -> str:
    topics = ["deploy", "database", "migration", "billing", "search", "backup"]
    return f"step {i}: we changed the {topics[i % 6]} settings and checked the logs " * 4


def build_dag(http: Http, tenant: IssuedKey) -> None:
    r = http.patch("/v1/tenant/settings", json=TENANT_SETTINGS, headers=auth(tenant))
    assert r.status_code == 200, r.text
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": words(i)} for i in range(48)
    ]
    turn = {"messages": messages, "token_budget": 2_000}
    r = http.post(f"/v1/conversations/{KEY}/turns", json=turn, headers=auth(tenant))
    assert r.status_code == 200, r.text
    r = http.post(f"/v1/conversations/{KEY}/compact", json={"wait": 60}, headers=auth(tenant))
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "done", r.text


def condensed_in_context(database: Database) -> tuple[int, str, list[str]]:
    """A condensed summary the context shows: its conversation, id and sources."""
    with database.session() as s:
        row = s.execute(
            select(ContextItem.conversation_id, Summary.id)
            .join(Summary, Summary.id == ContextItem.summary_id)
            .where(Summary.kind == "condensed")
            .order_by(ContextItem.ordinal)
            .limit(1)
        ).one()
        sources = s.scalars(
            select(SummaryParent.parent_id)
            .where(SummaryParent.summary_id == row[1])
            .order_by(SummaryParent.ordinal)
        ).all()
    return row[0], row[1], list(sources)


def links(database: Database) -> tuple[set[tuple[str, int]], set[tuple[str, str]]]:
    with database.session() as s:
        messages = {(r.summary_id, r.message_id) for r in s.scalars(select(SummaryMessage))}
        parents = {(r.summary_id, r.parent_id) for r in s.scalars(select(SummaryParent))}
    return messages, parents


def settled(http: Http, tenant: IssuedKey, body: dict[str, Any]) -> dict[str, Any]:
    """Poll the operation until it is no longer pending."""
    deadline = time.monotonic() + 60
    while body["status"] == "pending" and time.monotonic() < deadline:
        time.sleep(0.1)
        r = http.get(f"/v1/tenant/operations/{body['operation_id']}", headers=auth(tenant))
        assert r.status_code == 200, r.text
        body = r.json()
    return body


def scenario(http: Http, database: Database, tenant: IssuedKey, llm: FakeAnthropicServer) -> None:
    llm.set_default("ok")
    build_dag(http, tenant)
    cid, target, sources = condensed_in_context(database)
    before = links(database)

    # Rewrite, polled: the answer is the pending operation, a worker runs it.
    llm.set_default(Behaviour.reply("Rewritten by the operator: the zanzibar rollout.\n"))
    ask = {"instructions": "Name the rollout zanzibar."}
    r = http.post(f"/v1/tenant/summaries/{target}/rewrite", json=ask, headers=auth(tenant))
    assert r.status_code == 200, r.text
    op = settled(http, tenant, r.json())
    assert (op["status"], op["action"], op["targets"], op["done"]) == (
        "done",
        "rewrite",
        [target],
        1,
    ), op
    described = http.get(f"/v1/summaries/{target}", headers=auth(tenant)).json()
    assert "zanzibar" in described["content"]
    assert described["rewrites"] == 1
    assert described["rewritten_at"] is not None
    assert links(database) == before  # same id, same sources, same references
    grep = {"pattern": "zanzibar", "mode": "full_text", "scope": "summaries", "session_key": KEY}
    found = http.post("/v1/grep", json=grep, headers=auth(tenant)).json()["matches"]
    assert [m["id"] for m in found] == [target]  # search sees the new text
    assert any("Name the rollout zanzibar." in str(r.system) for r in llm.requests)

    # Dissolve, waited for: its sources take its place in the context.
    r = http.post(
        f"/v1/tenant/summaries/{target}/dissolve", json={"wait": 60}, headers=auth(tenant)
    )
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "done", r.json()
    with database.session() as s:
        shown = s.scalars(
            select(ContextItem.summary_id)
            .where(ContextItem.conversation_id == cid, ContextItem.summary_id.is_not(None))
            .order_by(ContextItem.ordinal)
        ).all()
    assert target not in shown
    at = shown.index(sources[0])
    assert shown[at : at + len(sources)] == sources
    assert http.get(f"/v1/summaries/{target}", headers=auth(tenant)).status_code == 200
    assert_lossless(database, cid)
    assert_tokens_consistent(database, cid)

    # Refusals: 409 with a code, 404 for what is not the tenant's.
    again = http.post(f"/v1/tenant/summaries/{target}/dissolve", json={}, headers=auth(tenant))
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "not_in_context"
    with database.session() as s:
        leaf = s.scalar(select(Summary.id).where(Summary.kind == "leaf").limit(1))
    r = http.post(f"/v1/tenant/summaries/{leaf}/dissolve", json={}, headers=auth(tenant))
    assert r.status_code == 409
    assert r.json()["error"]["code"] == "leaf_summary"
    reader = http.post(
        "/v1/tenant/keys", json={"name": "reader", "scopes": ["read"]}, headers=auth(tenant)
    )
    assert reader.status_code in (200, 201), reader.text
    read_only = {"Authorization": f"Bearer {reader.json()['api_key']}"}
    r = http.post(f"/v1/tenant/summaries/{leaf}/rewrite", json={}, headers=read_only)
    assert r.status_code == 403  # surgery needs the admin scope
    other = new_tenant(database, "other")
    r = http.post(f"/v1/tenant/summaries/{leaf}/rewrite", json={}, headers=auth(other))
    assert r.status_code == 404
    r = http.get(f"/v1/tenant/operations/{op['operation_id']}", headers=auth(other))
    assert r.status_code == 404


@pytest.mark.celery
def test_surgery_over_http_on_postgres_with_a_real_worker(
    pg_db: Database, llm_worker: None, llm: FakeAnthropicServer
) -> None:
    from api.app import create_app
    from workers.link import CeleryLink

    tenant = new_tenant(pg_db)
    settings = pg_db.settings.model_copy(update={"compact_wait_max_seconds": 60})
    app = create_app(settings, link=CeleryLink(), database=pg_db, broker_ping=lambda: True)
    with TestClient(app, raise_server_exceptions=False) as http:
        scenario(http, pg_db, tenant, llm)


@pytest.mark.celery
def test_a_subtree_rewrite_and_a_sweep_sent_together_on_real_workers(
    pg_db: Database, llm_worker: None, llm: FakeAnthropicServer
) -> None:
    """A turn's sweep and a rewrite reach the workers at once: they share one leased chain.

    The worker runs four threads, so both wake-ups are taken at the same
    time; the debt row's lease lets one chain through, which runs the
    rewrite's passes and the sweep's. Every summary the rewrite targeted is
    rewritten once, and the DAG is lossless and its counts consistent.
    """
    from api.app import create_app
    from workers.link import CeleryLink

    tenant = new_tenant(pg_db)
    settings = pg_db.settings.model_copy(update={"compact_wait_max_seconds": 60})
    app = create_app(settings, link=CeleryLink(), database=pg_db, broker_ping=lambda: True)
    with TestClient(app, raise_server_exceptions=False) as http:
        llm.set_default("ok")
        build_dag(http, tenant)
        cid, target, _ = condensed_in_context(pg_db)
        llm.set_default(Behaviour.ok(delay=0.05))
        more = [
            {"role": "user" if i % 2 == 0 else "assistant", "content": words(i)}
            for i in range(48, 80)
        ]
        turn = {"messages": more, "token_budget": 2_000}
        r = http.post(f"/v1/conversations/{KEY}/turns", json=turn, headers=auth(tenant))
        assert r.json()["compaction"] == "scheduled", r.text
        ask = {"subtree": True}
        r = http.post(f"/v1/tenant/summaries/{target}/rewrite", json=ask, headers=auth(tenant))
        assert r.status_code == 200, r.text
        op = settled(http, tenant, r.json())
        assert op["status"] == "done", op
        r = http.post(f"/v1/conversations/{KEY}/compact", json={"wait": 60}, headers=auth(tenant))
        assert r.json()["status"] == "done", r.text
    with pg_db.session() as s:
        rows = s.execute(select(Summary.id, Summary.rewrites).where(Summary.id.in_(op["targets"])))
        rewrites = {summary_id: count for summary_id, count in rows}
    assert rewrites == dict.fromkeys(op["targets"], 1)  # each once: no two runners at once
    assert_lossless(pg_db, cid)
    assert_tokens_consistent(pg_db, cid)


def test_surgery_over_http_on_sqlite_embedded(
    sqlite_db: Database, llm: FakeAnthropicServer, tmp_path: Path
) -> None:
    tenant = new_tenant(sqlite_db)
    env = {
        "LCM_DATABASE_URL": sqlite_db.settings.database_url,
        "LCM_HOME": str(tmp_path / "home"),
        "LCM_COMPACT_WAIT_MAX_SECONDS": "60",
        **llm_env(llm),
    }
    handle = servers.start_serve(env, log=tmp_path / "serve.log")
    try:
        with httpx.Client(base_url=handle.base_url, timeout=90) as http:
            scenario(http, sqlite_db, tenant, llm)
    finally:
        handle.stop()

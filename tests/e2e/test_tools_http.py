"""The agent tools over HTTP: contract, JSON 4xx errors, isolation, expand-query on a worker."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from lcm.db.engine import Database
from lcm.db.models import ContextItem, ExpansionGrant, Message
from lcm.tenants.service import IssuedKey
from tests.conftest import auth, new_tenant
from tests.integration.retrieval_data import compact, ingest

TEXTS = [f"message {i}: the nightly backup to bucket s3://ops-{i} finished" for i in range(30)]


@pytest.fixture
def history(db: Database, tenant: IssuedKey) -> str:
    """A compacted conversation; the id of a summary in its context."""
    cid = ingest(db, tenant.tenant_id, "agent:main", TEXTS)
    compact(db, tenant.tenant_id, cid)
    with db.session() as s:
        top = s.scalar(
            select(ContextItem.summary_id)
            .where(ContextItem.summary_id.is_not(None))
            .order_by(ContextItem.ordinal)
        )
    assert top is not None
    return str(top)


def test_grep_contract(client: TestClient, tenant: IssuedKey, history: str) -> None:
    body = {"pattern": "nightly backup", "mode": "full_text", "session_key": "agent:main"}
    r = client.post(
        "/v1/grep", json={**body, "limit": 3, "sort": "relevance"}, headers=auth(tenant)
    )
    assert r.status_code == 200, r.text
    matches = r.json()["matches"]
    assert len(matches) == 3
    assert set(matches[0]) >= {"type", "id", "conversation_id", "seq", "created_at", "snippet"}
    assert "score" in matches[0]
    assert "«" in matches[0]["snippet"]
    regex = client.post(
        "/v1/grep",
        json={
            "pattern": r"s3://ops-2\d\b",
            "scope": "messages",
            "conversation_id": matches[0]["conversation_id"],
        },
        headers=auth(tenant),
    )
    assert [m["seq"] for m in regex.json()["matches"]] == list(range(30, 20, -1))


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"pattern": "(a)\\1", "session_key": "agent:main"}, 400, "invalid_pattern"),
        ({"pattern": "x" * 1001, "session_key": "agent:main"}, 400, "pattern_too_long"),
        (
            {"pattern": "back.*up", "mode": "full_text", "session_key": "agent:main"},
            400,
            "use_regex_mode",
        ),
        ({"pattern": "backup"}, 400, "scope_required"),
        ({"pattern": "backup", "session_key": "agent:main", "limit": 201}, 400, "invalid_input"),
        ({"pattern": "backup", "session_key": "nobody"}, 404, "not_found"),
        ({"pattern": "backup", "conversation_id": 999}, 404, "not_found"),
    ],
)
def test_grep_refusals(
    client: TestClient,
    tenant: IssuedKey,
    history: str,
    body: dict[str, Any],
    status: int,
    code: str,
) -> None:
    r = client.post("/v1/grep", json=body, headers=auth(tenant))
    assert r.status_code == status, r.text
    assert r.json()["error"]["code"] == code


def test_describe_and_expand(client: TestClient, tenant: IssuedKey, history: str) -> None:
    described = client.get(f"/v1/summaries/{history}", headers=auth(tenant))
    assert described.status_code == 200, described.text
    info = described.json()
    assert info["id"] == history
    assert info["source_messages"]["first_seq"] == 1
    assert {"kind", "depth", "content", "token_count", "parents", "children"} <= set(info)
    expanded = client.post("/v1/expand", json={"summary_ids": [history]}, headers=auth(tenant))
    assert expanded.status_code == 200
    out = expanded.json()
    assert out["messages"][0]["message"] == {"role": "user", "content": TEXTS[0]}
    assert out["token_cap"] == 4_000
    assert out["nodes"][0]["id"] == history
    capped = client.post(
        "/v1/expand", json={"summary_ids": [history], "token_cap": 30}, headers=auth(tenant)
    ).json()
    assert capped["truncated"]
    assert capped["omitted"]["messages"] > 0
    too_big = client.post(
        "/v1/expand", json={"summary_ids": [history], "token_cap": 10**9}, headers=auth(tenant)
    )
    assert too_big.status_code == 400


def test_every_tool_hides_other_tenants(
    client: TestClient, db: Database, tenant: IssuedKey, history: str
) -> None:
    other = new_tenant(db, "other")
    theirs = auth(other)
    for path in (f"/v1/summaries/{history}", "/v1/summaries/sum_0000000000000000"):
        r = client.get(path, headers=theirs)
        assert r.status_code == 404
        assert r.json()["error"]["code"] == "not_found"
    assert client.get("/v1/files/file_abcdef", headers=theirs).status_code == 404
    assert (
        client.post("/v1/expand", json={"summary_ids": [history]}, headers=theirs).status_code
        == 404
    )
    everything = client.post(
        "/v1/grep", json={"pattern": "backup", "all_conversations": True}, headers=theirs
    )
    assert everything.status_code == 200
    assert everything.json()["matches"] == []
    query = {"prompt": "what?", "summary_ids": [history]}
    assert client.post("/v1/expand-query", json=query, headers=theirs).status_code == 404
    assert (
        client.post("/v1/grep", json={"pattern": "x", "all_conversations": True}).status_code == 401
    )


@pytest.fixture
def worker_client(celery_worker: Any, pg_db: Database) -> Iterator[TestClient]:
    from api.app import create_app
    from workers.link import CeleryLink

    app = create_app(pg_db.settings, link=CeleryLink(), database=pg_db, broker_ping=lambda: True)
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


@pytest.mark.celery
def test_expand_query_over_http_with_a_real_worker(
    worker_client: TestClient, pg_db: Database
) -> None:
    tenant = new_tenant(pg_db)
    cid = ingest(pg_db, tenant.tenant_id, "agent:main", TEXTS)
    with pg_db.read_session() as s:
        eighth = s.scalar(
            select(Message.id).where(Message.conversation_id == cid, Message.seq == 8)
        )
    body = {"prompt": "Where did backup 7 go?", "query": "ops-7", "session_key": "agent:main"}
    r = worker_client.post("/v1/expand-query", json=body, headers=auth(tenant))
    assert r.status_code == 200, r.text
    assert r.json()["offline"] is True
    assert r.json()["cited_ids"] == [f"msg_{eighth}"]
    worker_client.app.state.settings = pg_db.settings.model_copy(  # type: ignore[attr-defined]
        update={"expand_query_timeout_seconds": 0.001}
    )
    # The deadline passes before the loop starts: the worker answers by the
    # deadline with what it has (nothing), and says so.
    late = worker_client.post("/v1/expand-query", json=body, headers=auth(tenant))
    assert late.status_code == 200, late.text
    assert late.json()["truncated"] is True
    assert late.json()["cited_ids"] == []
    assert late.json()["conversations"][0]["status"] == "timed_out"
    with pg_db.session() as s:
        grants = s.scalars(select(ExpansionGrant)).all()
    assert len(grants) == 2
    assert all(g.revoked for g in grants)

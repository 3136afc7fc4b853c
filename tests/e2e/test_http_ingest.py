"""The ingest endpoint over HTTP: contract, auth, and every client mistake as a JSON 4xx."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from lcm.db.engine import Database
from lcm.db.models import ApiKey, Message
from lcm.tenants.keys import IssuedKey, hash_key
from tests.conftest import RecordingSender, auth, new_tenant

URL = "/v1/conversations/agent%3Amain%2Fdm/messages"


def count_messages(db: Database) -> int:
    with db.session() as s:
        return int(s.scalar(select(func.count()).select_from(Message)) or 0)


def test_post_messages_then_repost(client: TestClient, tenant: IssuedKey, db: Database) -> None:
    body = {
        "session_id": "s1",
        "messages": [
            {"role": "user", "content": "hi", "id": "u1", "created_at": "2026-11-22T10:00:00Z"},
            {"role": "assistant", "content": [{"type": "text", "text": "hello"}], "id": "a1"},
        ],
    }
    first = client.post(URL, json=body, headers=auth(tenant))
    assert first.status_code == 200, first.text
    assert first.json()["ingested"] == 2
    assert first.json()["duplicates"] == 0
    again = client.post(URL, json=body, headers=auth(tenant))
    assert again.json() == {**first.json(), "ingested": 0, "duplicates": 2}
    assert count_messages(db) == 2


def test_session_key_may_contain_slashes(client: TestClient, tenant: IssuedKey) -> None:
    a = client.post(
        "/v1/conversations/a%2Fb/messages",
        headers=auth(tenant),
        json={"messages": [{"role": "user", "content": "x"}]},
    )
    b = client.post(
        "/v1/conversations/a/b/messages",
        headers=auth(tenant),
        json={"messages": [{"role": "user", "content": "y"}]},
    )
    assert a.status_code == b.status_code == 200
    assert a.json()["conversation_id"] == b.json()["conversation_id"]


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer nope"},
        {"Authorization": "Basic abc"},
        {"Authorization": "Bearer "},
    ],
)
def test_unauthenticated(client: TestClient, headers: dict[str, str], db: Database) -> None:
    r = client.post(URL, json={"messages": [{"role": "user", "content": "x"}]}, headers=headers)
    assert r.status_code == 401
    assert r.json()["error"]["code"] == "unauthenticated"
    assert count_messages(db) == 0


def test_only_the_key_hash_is_stored(tenant: IssuedKey, db: Database) -> None:
    with db.session() as s:
        stored = s.scalars(select(ApiKey.key_hash)).all()
    assert stored == [hash_key(tenant.api_key)]
    assert tenant.api_key not in stored


def test_tenants_never_share_a_conversation(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    other = new_tenant(db, "other")
    body = {"messages": [{"role": "user", "content": "x", "id": "same"}]}
    a = client.post(URL, json=body, headers=auth(tenant)).json()
    b = client.post(URL, json=body, headers=auth(other)).json()
    assert a["conversation_id"] != b["conversation_id"]
    assert (a["ingested"], b["ingested"]) == (1, 1)


BAD_BODIES = [
    ({"messages": [{"role": "robot", "content": "x"}]}, "role"),
    ({"messages": [{"role": "user"}]}, "content"),
    ({"messages": [{"role": "user", "content": [{"type": "tool_use"}]}]}, "messages[1].content[0]"),
    ({"messages": [{"role": "user", "content": "x", "created_at": "not a time"}]}, "created_at"),
    ({"messages": [{"role": "user", "content": "x", "created_at": [1]}]}, "created_at"),
    ({"messages": [{"role": "user", "content": "nul\u0000byte"}]}, "NUL"),
    ({"messages": [{"role": "user", "content": "lone \ud83d surrogate"}]}, "surrogate"),
    ({"messages": "nope"}, "messages"),
    ({}, "messages"),
]


@pytest.mark.parametrize(("body", "fragment"), BAD_BODIES)
def test_bad_input_is_a_400_with_a_json_error(
    client: TestClient, tenant: IssuedKey, db: Database, body: dict[str, object], fragment: str
) -> None:
    good = {"role": "user", "content": "kept only if the whole batch is valid", "id": "g"}
    if isinstance(body.get("messages"), list):
        body = {"messages": [good, *body["messages"]]}  # type: ignore[misc]
    raw = json.dumps(body, ensure_ascii=True)  # \\u escapes reach the server as sent
    r = client.post(URL, content=raw, headers={**auth(tenant), "content-type": "application/json"})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["code"] in ("invalid_input", "invalid_text")
    assert fragment in error["message"]
    assert count_messages(db) == 0


@pytest.mark.parametrize("raw", [b"{not json", b"\xff\xfe garbage", b"[]", b""])
def test_unparseable_bodies(client: TestClient, tenant: IssuedKey, raw: bytes) -> None:
    r = client.post(URL, content=raw, headers={**auth(tenant), "content-type": "application/json"})
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "invalid_input"


def test_size_limits_are_413(db: Database, tenant: IssuedKey) -> None:
    from api.app import create_app
    from workers.link import CeleryLink

    settings = db.settings.model_copy(
        update={"max_body_bytes": 4096, "max_batch_messages": 3, "max_message_chars": 100}
    )
    # No broker here: jobs (SQLite's search indexing) are recorded, not sent.
    app = create_app(
        settings, link=CeleryLink(), database=db, broker_ping=lambda: True, sender=RecordingSender()
    )
    with TestClient(app) as c:
        big = c.post(
            URL, headers=auth(tenant), json={"messages": [{"role": "user", "content": "x" * 5000}]}
        )
        many = c.post(
            URL, headers=auth(tenant), json={"messages": [{"role": "user", "content": "x"}] * 4}
        )
        long = c.post(
            URL, headers=auth(tenant), json={"messages": [{"role": "user", "content": "x" * 101}]}
        )
        ok = c.post(
            URL,
            headers=auth(tenant),
            json={"messages": [{"role": "user", "content": "x" * 100}] * 3},
        )
    for r in (big, many, long):
        assert r.status_code == 413, r.text
        assert r.json()["error"]["code"] == "too_large"
    assert ok.status_code == 200
    assert count_messages(db) == 3


def test_health_ready_metrics(client: TestClient, tenant: IssuedKey) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["checks"] == {"database": "ok", "broker": "ok"}
    client.post(URL, json={"messages": [{"role": "user", "content": "x"}]}, headers=auth(tenant))
    text = client.get("/metrics").text
    assert (
        'lcm_http_requests_total{method="POST",route="/v1/conversations/{key:path}/messages",status="200"}'
        in text
    )
    assert "lcm_http_request_duration_seconds_bucket" in text


def test_readyz_reports_a_dead_broker(db: Database) -> None:
    from api.app import create_app
    from workers.link import CeleryLink

    with TestClient(
        create_app(db.settings, link=CeleryLink(), database=db, broker_ping=lambda: False)
    ) as c:
        r = c.get("/readyz")
    assert r.status_code == 503
    assert r.json()["checks"]["broker"] == "unreachable"


def test_unknown_route_is_a_json_404(client: TestClient) -> None:
    r = client.get("/v1/nope")
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "not_found"

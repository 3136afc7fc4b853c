"""Hostile and malformed input over HTTP: a 4xx with a clear code, nothing stored altered.

Each case here was a 5xx or a silent alteration before the one validation layer
(``api/validation.py``) existed; each runs on SQLite and Postgres.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from lcm.db.engine import Database
from lcm.db.models import Conversation, Message
from lcm.tenants.service import IssuedKey
from tests.conftest import auth

BIG = 2**63
MSG = {"messages": [{"role": "user", "content": "hello"}]}


def _raw(client: TestClient, method: str, url: str, issued: IssuedKey, body: str) -> Any:
    headers = {**auth(issued), "content-type": "application/json"}
    return client.request(method, url, content=body.encode(), headers=headers)


def _code(response: Any) -> str:
    assert 400 <= response.status_code < 500, (response.status_code, response.text)
    return str(response.json()["error"]["code"])


def count(db: Database, model: type) -> int:
    with db.session() as s:
        return int(s.scalar(select(func.count()).select_from(model)) or 0)


def test_settings_refuse_lone_surrogates_and_stay_readable(
    client: TestClient, tenant: IssuedKey
) -> None:
    for field in ("custom_instructions", "summary_model"):
        response = _raw(client, "PATCH", "/v1/tenant/settings", tenant, f'{{"{field}": "\\ud800"}}')
        assert response.status_code == 400
        assert _code(response) == "invalid_text"
    nul = _raw(
        client, "PATCH", "/v1/tenant/settings", tenant, '{"custom_instructions": "a\\u0000"}'
    )
    assert _code(nul) == "invalid_text"
    after = client.get("/v1/tenant/settings", headers=auth(tenant))
    assert after.status_code == 200
    assert after.json()["overrides"] == {}


def test_integers_beyond_int64_are_400(client: TestClient, tenant: IssuedKey) -> None:
    client.post("/v1/conversations/k/messages", headers=auth(tenant), json=MSG)
    probes = [
        ("/v1/conversations/k/compact", {"target_tokens": BIG}),
        ("/v1/grep", {"pattern": "x", "conversation_id": BIG}),
        ("/v1/grep", {"pattern": "x", "conversation_id": -BIG - 1}),
        ("/v1/expand-query", {"prompt": "p", "query": "q", "conversation_id": BIG}),
        ("/v1/expand", {"summary_ids": ["sum_0000000000000000"], "token_cap": BIG}),
    ]
    for url, body in probes:
        response = client.post(url, headers=auth(tenant), json=body)
        assert response.status_code == 400, (url, response.status_code, response.text)
        assert response.json()["error"]["code"] == "invalid_input"
    status = client.get(f"/v1/conversations/k/status?token_budget={BIG}", headers=auth(tenant))
    assert status.status_code == 400, status.text


def test_datetimes_out_of_range_are_400(client: TestClient, tenant: IssuedKey) -> None:
    for field, value in (
        ("since", "0001-01-01T00:00:00+14:00"),
        ("before", "9999-12-31T23:59:59-14:00"),
    ):
        body = {"pattern": "x", "all_conversations": True, field: value}
        response = client.post("/v1/grep", headers=auth(tenant), json=body)
        assert response.status_code == 400, response.text
        assert field in response.json()["error"]["message"]
    # The same extremes inside a message timestamp.
    body = {
        "messages": [{"role": "user", "content": "x", "created_at": "0001-01-01T00:00:00+14:00"}]
    }
    response = client.post("/v1/conversations/k/messages", headers=auth(tenant), json=body)
    assert response.status_code == 400, response.text


def test_text_fields_refuse_nul_and_lone_surrogates(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    probes = [
        ("/v1/expand", '{"summary_ids": ["sum_\\ud800"]}'),
        ("/v1/grep", '{"pattern": "a\\u0000", "mode": "full_text", "all_conversations": true}'),
        ("/v1/grep", '{"pattern": "\\ud800", "all_conversations": true}'),
        ("/v1/grep", '{"pattern": "x", "session_key": "a\\u0000"}'),
        ("/v1/conversations/k/messages", '{"session_id": "s\\u0000", ' + json.dumps(MSG)[1:]),
        ("/v1/conversations/k/messages", '{"session_id": "\\udc00", ' + json.dumps(MSG)[1:]),
        ("/v1/expand-query", '{"prompt": "\\ud800", "query": "q", "all_conversations": true}'),
        ("/v1/conversations/k/assemble", '{"token_budget": 100, "prompt": "a\\u0000"}'),
    ]
    for url, body in probes:
        response = _raw(client, "POST", url, tenant, body)
        assert _code(response) == "invalid_text", (url, response.text)
    assert count(db, Conversation) == 0


def test_session_keys_refuse_nul_and_invalid_utf8(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    for key in ("a%00b", "%FF", "%FE", "%ED%A0%80", "%C0%80"):
        response = client.post(f"/v1/conversations/{key}/messages", headers=auth(tenant), json=MSG)
        assert response.status_code == 400, (key, response.text)
        assert response.json()["error"]["code"] in {"invalid_text", "invalid_path"}
    query = client.get("/v1/conversations/k/status?session_id=%FF", headers=auth(tenant))
    assert query.status_code == 400, query.text
    assert count(db, Conversation) == 0
    # U+FFFD itself, sent as valid UTF-8, is an ordinary key of its own.
    ok = client.post("/v1/conversations/%EF%BF%BD/messages", headers=auth(tenant), json=MSG)
    assert ok.status_code == 200, ok.text
    with db.session() as s:
        assert s.scalars(select(Conversation.session_key)).all() == ["\ufffd"]


def test_unknown_message_fields_are_refused(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    body = {"messages": [{"role": "user", "content": "x", "usage": {"input": 3}}]}
    response = client.post("/v1/conversations/k/messages", headers=auth(tenant), json=body)
    assert response.status_code == 400
    assert "usage" in response.json()["error"]["message"]
    typo = client.post(
        "/v1/conversations/k/turns", headers=auth(tenant), json={**MSG, "tokenBudget": 100}
    )
    assert typo.status_code == 400
    assert "tokenBudget" in typo.json()["error"]["message"]
    assert count(db, Message) == 0


def test_deep_nesting_is_400(client: TestClient, tenant: IssuedKey, db: Database) -> None:
    deep = "[" * 50_000 + "]" * 50_000
    line = '{"type": "message", "id": "e1", "message": {"role": "user", "content": ' + deep + "}}"
    body = json.dumps({"transcript_jsonl": line + "\n"})
    response = _raw(client, "POST", "/v1/conversations/k/bootstrap", tenant, body)
    assert _code(response) == "too_deep"
    # A request body nested beyond the parser's recursion limit.
    response = _raw(client, "POST", "/v1/conversations/k/messages", tenant, deep)
    assert response.status_code == 400, response.text
    # Block content nested deeper than the bound, but well within the parser's limit.
    nested: object = "x"
    for _ in range(200):
        nested = [nested]
    blocks = [{"type": "tool_result", "tool_use_id": "t1", "content": nested}]
    body = json.dumps({"messages": [{"role": "user", "content": blocks}]})
    response = _raw(client, "POST", "/v1/conversations/k/messages", tenant, body)
    assert _code(response) == "too_deep"
    assert count(db, Message) == 0


def test_bootstrap_refuses_unstorable_text_like_ingest(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    line = {
        "type": "message",
        "id": "e1",
        "message": {"role": "user", "content": "bad \ud800 text"},
    }
    transcript = json.dumps(line) + "\n"  # json.dumps escapes the surrogate as \ud800
    body = json.dumps({"transcript_jsonl": transcript})
    response = _raw(client, "POST", "/v1/conversations/k/bootstrap", tenant, body)
    assert _code(response) == "invalid_text", response.text
    assert count(db, Message) == 0

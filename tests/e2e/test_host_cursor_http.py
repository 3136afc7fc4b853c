"""The host's transcript cursor over HTTP: stored with its batch, read per live conversation."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from lcm.db.engine import Database
from lcm.tenants.keys import IssuedKey
from tests.conftest import auth, new_tenant

BASE = "/v1/conversations/agent%3Amain%2Fdm"


def send(
    client: TestClient, tenant: IssuedKey, messages: list[dict[str, Any]], **extra: Any
) -> Any:  # the test client's response
    body = {"messages": messages, **extra}
    return client.post(f"{BASE}/messages", json=body, headers=auth(tenant))


def cursor_of(client: TestClient, tenant: IssuedKey, **params: str) -> Any:
    r = client.get(f"{BASE}/host-cursor", params=params, headers=auth(tenant))
    assert r.status_code == 200, r.text
    return r.json()


def message(i: int) -> dict[str, Any]:
    return {"role": "user" if i % 2 == 0 else "assistant", "content": f"entry {i}", "id": f"e{i}"}


def test_the_cursor_is_stored_with_its_batch_and_replaced_by_the_next(
    client: TestClient, tenant: IssuedKey
) -> None:
    first = send(client, tenant, [message(0), message(1)], host_cursor="c1")
    assert first.status_code == 200, first.text
    conversation_id = first.json()["conversation_id"]
    assert cursor_of(client, tenant) == {
        "conversation_id": conversation_id,
        "session_id": None,
        "host_cursor": "c1",
    }
    long = "x" * 8192  # the largest cursor accepted
    assert send(client, tenant, [message(2)], host_cursor=long).status_code == 200
    assert cursor_of(client, tenant)["host_cursor"] == long
    # A batch without a cursor leaves it; a batch of duplicates still moves it.
    assert send(client, tenant, [message(3)]).json()["ingested"] == 1
    assert cursor_of(client, tenant)["host_cursor"] == long
    again = send(client, tenant, [message(3)], host_cursor="c3")
    assert again.json()["duplicates"] == 1
    assert cursor_of(client, tenant)["host_cursor"] == "c3"


def test_an_empty_batch_only_moves_the_cursor_creating_the_conversation_if_needed(
    client: TestClient, tenant: IssuedKey
) -> None:
    r = send(client, tenant, [], session_id="s1", host_cursor="start")
    assert r.status_code == 200, r.text
    assert r.json()["ingested"] == 0
    assert cursor_of(client, tenant) == {
        "conversation_id": r.json()["conversation_id"],
        "session_id": "s1",
        "host_cursor": "start",
    }
    assert cursor_of(client, tenant, session_id="s1")["host_cursor"] == "start"


def test_a_refused_batch_leaves_the_cursor(client: TestClient, tenant: IssuedKey) -> None:
    assert send(client, tenant, [message(0)], host_cursor="kept").status_code == 200
    invalid = send(client, tenant, [message(1), {"role": "robot", "content": "x"}], host_cursor="c")
    assert invalid.status_code == 400, invalid.text
    # Refused after the conversation row was locked and written: the quota
    # check comes last in the batch's transaction.
    patched = client.patch(
        "/v1/tenant/settings", json={"max_stored_messages": 1}, headers=auth(tenant)
    )
    assert patched.status_code == 200, patched.text
    over = send(client, tenant, [message(1)], host_cursor="over")
    assert over.status_code == 429, over.text
    assert over.json()["error"]["code"] == "quota_exceeded"
    assert cursor_of(client, tenant)["host_cursor"] == "kept"


def test_bad_cursors_are_400(client: TestClient, tenant: IssuedKey) -> None:
    for bad in ("", "x" * 8193, "nul\u0000", 7):
        r = send(client, tenant, [message(0)], host_cursor=bad)
        assert r.status_code == 400, (bad, r.text)
        assert r.json()["error"]["code"] in ("invalid_input", "invalid_text")
    # The cursor belongs to the messages route: turns refuse it as an unknown field.
    turn = {"messages": [], "token_budget": 1000, "host_cursor": "c"}
    r = client.post(f"{BASE}/turns", json=turn, headers=auth(tenant))
    assert r.status_code == 400, r.text


def test_a_skipped_session_stores_no_cursor(client: TestClient, tenant: IssuedKey) -> None:
    patched = client.patch(
        "/v1/tenant/settings", json={"ignore_session_patterns": ["agent:**"]}, headers=auth(tenant)
    )
    assert patched.status_code == 200, patched.text
    r = send(client, tenant, [message(0)], host_cursor="c")
    assert r.json()["ignored"] is True
    missing = client.get(f"{BASE}/host-cursor", headers=auth(tenant))
    assert missing.status_code == 404


def test_the_cursor_belongs_to_the_live_conversation(client: TestClient, tenant: IssuedKey) -> None:
    old = send(client, tenant, [message(0)], session_id="s1", host_cursor="old").json()
    reset = client.post(
        f"{BASE}/session", json={"mode": "reset", "session_id": "s2"}, headers=auth(tenant)
    )
    assert reset.status_code == 200, reset.text
    fresh = cursor_of(client, tenant)
    assert fresh == {
        "conversation_id": reset.json()["conversation_id"],
        "session_id": "s2",
        "host_cursor": None,
    }
    assert fresh["conversation_id"] != old["conversation_id"]
    # The archived conversation keeps its own, read by its session id.
    assert cursor_of(client, tenant, session_id="s1")["host_cursor"] == "old"
    send(client, tenant, [message(1)], session_id="s2", host_cursor="new")
    assert cursor_of(client, tenant)["host_cursor"] == "new"
    assert cursor_of(client, tenant, session_id="s1")["host_cursor"] == "old"


def test_only_the_owner_reads_the_cursor_with_a_read_key(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    send(client, tenant, [message(0)], host_cursor="mine")
    other = new_tenant(db, "other")
    r = client.get(f"{BASE}/host-cursor", headers=auth(other))
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "not_found"
    unknown = client.get("/v1/conversations/nobody/host-cursor", headers=auth(tenant))
    assert unknown.status_code == 404
    made = client.post(
        "/v1/tenant/keys", json={"name": "writer", "scopes": ["ingest"]}, headers=auth(tenant)
    )
    assert made.status_code == 201, made.text
    writer = {"Authorization": f"Bearer {made.json()['api_key']}"}
    assert client.get(f"{BASE}/host-cursor", headers=writer).status_code == 403

"""API keys over HTTP: scopes on every route, revocation on the next request, rotation."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import select

from api.deps import operation_scopes
from lcm.db.engine import Database
from lcm.db.models import ApiKey
from lcm.tenants.keys import DEFAULT_SCOPES, SCOPES, IssuedKey, create_key
from tests.conftest import auth, new_tenant

KEYS = "/v1/tenant/keys"

# Every authenticated route and the one scope it needs. A route added to the
# app without an entry here (or without a scope) fails
# test_the_scope_table_covers_every_route: its scope is a decision to make.
EXPECTED_SCOPES: dict[tuple[str, str], str] = {
    ("POST", "/v1/conversations/{key}/messages"): "ingest",
    ("POST", "/v1/conversations/{key}/turns"): "ingest",
    ("POST", "/v1/conversations/{key}/commits"): "ingest",
    ("POST", "/v1/conversations/{key}/bootstrap"): "ingest",
    ("POST", "/v1/conversations/{key}/compact"): "ingest",
    ("POST", "/v1/conversations/{key}/fork"): "ingest",
    ("POST", "/v1/conversations/{key}/fork/end"): "ingest",
    ("POST", "/v1/conversations/{key}/fork/rollback"): "ingest",
    ("POST", "/v1/conversations/{key}/assemble"): "read",
    ("GET", "/v1/conversations/{key}/status"): "read",
    ("GET", "/v1/conversations/{key}/host-cursor"): "read",
    ("POST", "/v1/grep"): "read",
    ("GET", "/v1/summaries/{summary_id}"): "read",
    ("GET", "/v1/files/{file_id}"): "read",
    ("POST", "/v1/expand"): "read",
    ("POST", "/v1/expand-query"): "read",
    ("GET", "/v1/tenant/settings"): "admin",
    ("PATCH", "/v1/tenant/settings"): "admin",
    ("GET", KEYS): "admin",
    ("POST", KEYS): "admin",
    ("POST", KEYS + "/{key_id}/revoke"): "admin",
    ("POST", KEYS + "/{key_id}/rotate"): "admin",
    ("GET", "/v1/tenant/usage"): "admin",
    ("POST", "/v1/conversations/{key}/session"): "ingest",
    ("GET", "/v1/tenant/doctor"): "admin",
    ("POST", "/v1/tenant/doctor/apply"): "admin",
    ("POST", "/v1/tenant/summaries/{summary_id}/rewrite"): "admin",
    ("POST", "/v1/tenant/summaries/{summary_id}/dissolve"): "admin",
    ("GET", "/v1/tenant/operations/{operation_id}"): "admin",
    ("DELETE", "/v1/tenant"): "admin",
    ("GET", "/v1/conversations"): "read",
    ("DELETE", "/v1/conversations/{key}"): "admin",
    ("GET", "/v1/conversations/{key}/export"): "admin",
    ("POST", "/v1/conversations/{key}/import"): "admin",
    ("GET", "/v1/tenant/secrets/reads"): "admin",
    ("POST", "/v1/tenant/secrets/erase"): "admin",
    ("POST", "/v1/tenant/secrets/scans"): "admin",
    ("GET", "/v1/tenant/secrets/scans/{scan_id}"): "admin",
    ("GET", "/v1/tenant/secrets/report"): "admin",
}
# The calls of a gateway turn check their key in the route, after FastAPI has
# validated the body (one thread-pool hop per request: api/deps.py), so an
# invalid body is refused before the key. They get a valid one; allowed, it
# writes to the probe conversation only.
TURN_MESSAGES = [{"role": "user", "content": "scope probe"}]
VALID_BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", "/v1/conversations/{key}/messages"): {"messages": TURN_MESSAGES},
    ("POST", "/v1/conversations/{key}/turns"): {"messages": TURN_MESSAGES, "token_budget": 1000},
    ("POST", "/v1/conversations/{key}/assemble"): {"token_budget": 1000},
}
# Harmless values for path parameters: nothing they name exists (so an
# allowed request cannot change anything else, e.g. revoke the calling key).
PATH_VALUES = {
    "{key}": "scope-probe",
    "{summary_id}": "sum_0000000000000000",
    "{file_id}": "file_00000000",
    "{key_id}": "999999",
    "{scan_id}": "999999",
}


def v1_operations(client: TestClient) -> dict[tuple[str, str], str | None]:
    """(method, path template) -> declared scope, for every /v1 operation in the app's routes."""
    app: FastAPI = client.app  # type: ignore[assignment]
    return {op: scope for op, scope in operation_scopes(app.routes).items() if "/v1/" in op[1]}


def concrete(path: str) -> str:
    for placeholder, value in PATH_VALUES.items():
        path = path.replace(placeholder, value)
    return path


def key_with(db: Database, tenant: IssuedKey, *scopes: str, name: str = "probe") -> IssuedKey:
    with db.session() as session:
        issued = create_key(session, tenant.tenant_id, name, scopes)
        session.commit()
    return issued


def call(
    client: TestClient,
    method: str,
    path: str,
    key: IssuedKey | str,
    body: dict[str, Any] | None = None,
) -> Any:
    raw = key if isinstance(key, str) else key.api_key
    headers = {"Authorization": f"Bearer {raw}"}
    sent = None if method == "GET" else (body or {})
    return client.request(method, path, headers=headers, json=sent)


def test_the_scope_table_covers_every_route(client: TestClient) -> None:
    declared = v1_operations(client)
    assert None not in declared.values(), f"routes without a scope: {declared}"
    assert declared == EXPECTED_SCOPES


def test_every_route_refuses_a_key_without_its_scope(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    single = {scope: key_with(db, tenant, scope, name=scope) for scope in SCOPES}
    operations = v1_operations(client)
    assert len(operations) == len(EXPECTED_SCOPES)
    for (method, path), needed in operations.items():
        for scope, key in single.items():
            body = VALID_BODIES.get((method, path))
            response = call(client, method, concrete(path), key, body)
            where = f"{method} {path} with a {scope!r} key: {response.status_code} {response.text}"
            if scope == needed:
                # Past authentication and the scope check: whatever the
                # route itself answers to an empty request (200, 400, 404).
                assert response.status_code not in (401, 403), where
                assert response.status_code < 500, where
            else:
                assert response.status_code == 403, where
                assert response.json()["error"]["code"] == "forbidden", where


def test_a_read_key_cannot_write_anything(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    reader = key_with(db, tenant, "read")
    turn = {"messages": [{"role": "user", "content": "hi"}], "token_budget": 1000}
    writes = [
        ("POST", "/v1/conversations/c/messages", {"messages": turn["messages"]}),
        ("POST", "/v1/conversations/c/turns", turn),
        ("POST", "/v1/conversations/c/commits", {**turn, "advancement_key": "a1"}),
        ("POST", "/v1/conversations/c/bootstrap", {"transcript_jsonl": ""}),
        ("POST", "/v1/conversations/c/compact", {}),
        ("POST", "/v1/conversations/c/fork", {"parent_session_key": "p"}),
        ("PATCH", "/v1/tenant/settings", {"fresh_tail_count": 2}),
        ("POST", KEYS, {"name": "escalate", "scopes": ["admin"]}),
        ("POST", f"{KEYS}/{reader.key.id}/rotate", None),
        ("POST", f"{KEYS}/{reader.key.id}/revoke", None),
    ]
    for method, path, body in writes:
        response = client.request(method, path, headers=auth(reader), json=body)
        assert response.status_code == 403, f"{method} {path}: {response.text}"
    # The tenant's full key writes the same turn fine: the refusal was the scope.
    ok = client.post("/v1/conversations/c/turns", headers=auth(tenant), json=turn)
    assert ok.status_code == 200, ok.text
    with db.session() as s:
        assert s.scalar(select(ApiKey.revoked_at).where(ApiKey.id == reader.key.id)) is None
        assert len(s.scalars(select(ApiKey)).all()) == 2


def test_keys_from_tenant_create_hold_every_scope_but_secrets(
    client: TestClient, tenant: IssuedKey
) -> None:
    assert tenant.key.scopes == DEFAULT_SCOPES == ("ingest", "read", "admin")
    listed = client.get(KEYS, headers=auth(tenant))
    assert listed.status_code == 200, listed.text
    assert [k["scopes"] for k in listed.json()["keys"]] == [list(DEFAULT_SCOPES)]
    # Named, it is granted; a key made without naming scopes never holds it.
    made = client.post(KEYS, headers=auth(tenant), json={"name": "vault", "scopes": ["secrets"]})
    assert made.status_code == 201, made.text
    assert made.json()["scopes"] == ["secrets"]
    plain = client.post(KEYS, headers=auth(tenant), json={"name": "plain"})
    assert plain.status_code == 201, plain.text
    assert "secrets" not in plain.json()["scopes"]
    assert "secrets" in SCOPES


def test_a_revoked_key_gets_401_on_its_next_request(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    created = client.post(KEYS, headers=auth(tenant), json={"name": "gateway-1"})
    assert created.status_code == 201, created.text
    gateway = created.json()["api_key"]
    status_path = "/v1/conversations/x/status"
    assert call(client, "GET", status_path, gateway).status_code == 404  # authenticated
    revoked = client.post(f"{KEYS}/{created.json()['id']}/revoke", headers=auth(tenant))
    assert revoked.status_code == 200, revoked.text
    assert revoked.json()["revoked_at"] is not None
    after = call(client, "GET", status_path, gateway)
    assert after.status_code == 401, after.text
    assert after.json()["error"]["code"] == "unauthenticated"
    # Revoking again keeps the first time; the tenant's other key still works.
    again = client.post(f"{KEYS}/{created.json()['id']}/revoke", headers=auth(tenant))
    assert again.json()["revoked_at"] == revoked.json()["revoked_at"]
    assert call(client, "GET", status_path, tenant).status_code == 404
    # A key may revoke itself: its own next request is refused.
    me = key_with(db, tenant, "admin", name="self")
    assert client.post(f"{KEYS}/{me.key.id}/revoke", headers=auth(me)).status_code == 200
    assert client.get(KEYS, headers=auth(me)).status_code == 401


def test_rotate_revokes_the_old_key_and_keeps_name_and_scopes(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    old = key_with(db, tenant, "read", "ingest", name="agent-tools")
    rotated = client.post(f"{KEYS}/{old.key.id}/rotate", headers=auth(tenant))
    assert rotated.status_code == 201, rotated.text
    new = rotated.json()
    assert new["name"] == "agent-tools"
    assert new["scopes"] == ["ingest", "read"]
    assert new["id"] != old.key.id
    assert new["api_key"] != old.api_key
    assert new["revoked_at"] is None
    status_path = "/v1/conversations/x/status"
    assert call(client, "GET", status_path, old).status_code == 401
    assert call(client, "GET", status_path, new["api_key"]).status_code == 404  # authenticated
    assert call(client, "GET", "/v1/tenant/settings", new["api_key"]).status_code == 403
    # A revoked key cannot be rotated back to life.
    twice = client.post(f"{KEYS}/{old.key.id}/rotate", headers=auth(tenant))
    assert twice.status_code == 409, twice.text
    keys = {k["id"]: k for k in client.get(KEYS, headers=auth(tenant)).json()["keys"]}
    assert keys[old.key.id]["revoked_at"] is not None
    assert keys[new["id"]]["revoked_at"] is None
    assert keys[new["id"]]["scopes"] == new["scopes"]


def test_listing_never_shows_a_key_or_its_hash(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    made = client.post(KEYS, headers=auth(tenant), json={"name": "ci", "scopes": ["read"]})
    assert made.status_code == 201, made.text
    raw_keys = [tenant.api_key, made.json()["api_key"]]
    with db.session() as s:
        hashes = list(s.scalars(select(ApiKey.key_hash)))
    listed = client.get(KEYS, headers=auth(tenant))
    assert listed.status_code == 200, listed.text
    for secret in raw_keys + hashes:
        assert secret not in listed.text
    keys = listed.json()["keys"]
    assert [set(k) for k in keys] == [
        {"id", "name", "prefix", "scopes", "created_at", "revoked_at"}
    ] * 2
    assert [k["prefix"] for k in keys] == [raw[:12] for raw in raw_keys]
    assert [k["name"] for k in keys] == ["default", "ci"]


@pytest.mark.parametrize(
    "body",
    [
        {"name": "x", "scopes": ["write"]},
        {"name": "x", "scopes": []},
        {"name": "", "scopes": ["read"]},
        {"name": "x", "scopes": ["read"], "extra": 1},
    ],
)
def test_bad_key_requests_are_400(
    client: TestClient, tenant: IssuedKey, body: dict[str, Any]
) -> None:
    response = client.post(KEYS, headers=auth(tenant), json=body)
    assert response.status_code == 400, response.text


def test_another_tenants_key_is_not_found(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    other = new_tenant(db, "globex")
    for action in ("revoke", "rotate"):
        response = client.post(f"{KEYS}/{other.key.id}/{action}", headers=auth(tenant))
        assert response.status_code == 404, response.text
    assert call(client, "GET", "/v1/conversations/x/status", other).status_code == 404
    listed = client.get(KEYS, headers=auth(tenant)).json()["keys"]
    assert [k["id"] for k in listed] == [tenant.key.id]

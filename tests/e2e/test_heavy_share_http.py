"""Heavy routes take a slot of their tenant's share first; a tenant out of slots waits, then 429.

Each heavy route (grep, export, bootstrap, import) is called while the
calling tenant's slots of that kind are all taken (a share whose semaphore
has none): it waits ``heavy_wait_seconds`` and is refused with 429
``heavy_busy`` and a Retry-After, having written nothing, while another
tenant's identical request goes through at once.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from fastapi.testclient import TestClient

from api.heavy_work import HeavyKind, HeavyShare, _TenantSlots
from lcm.db.engine import Database
from lcm.tenants.service import IssuedKey
from tests.conftest import auth, new_tenant
from tests.e2e.test_console import login_token
from tests.integration.retrieval_data import ingest

TRANSCRIPT = "\n".join(
    json.dumps(line)
    for line in [
        {"type": "session", "version": 3, "id": "s-1", "timestamp": "2026-01-01T00:00:00Z"},
        {
            "type": "message",
            "id": "m1",
            "parentId": None,
            "timestamp": "2026-01-01T00:00:01Z",
            "message": {"role": "user", "content": [{"type": "text", "text": "hello"}]},
        },
    ]
)


def exhausted(client: TestClient, tenant_id: str, kind: HeavyKind) -> HeavyShare:
    """A share with no ``kind`` slot left for ``tenant_id`` and a short wait."""
    heavy = HeavyShare(reads_per_tenant=2, writes_per_tenant=1, total=4, wait_seconds=0.2)
    heavy._tenants[(tenant_id, kind)] = _TenantSlots(asyncio.Semaphore(0), users=1)
    client.app.state.heavy_share = heavy  # type: ignore[attr-defined]
    return heavy


def call(client: TestClient, issued: IssuedKey, route: str, body: Any) -> Any:
    key = f"k-{issued.tenant_name}"
    if route == "grep":
        payload = {"pattern": "hel+o", "mode": "regex", "session_key": key}
        return client.post("/v1/grep", json=payload, headers=auth(issued))
    if route == "export":
        return client.get(f"/v1/conversations/{key}/export", headers=auth(issued))
    if route == "bootstrap":
        payload = {"transcript_jsonl": TRANSCRIPT}
        return client.post(
            f"/v1/conversations/{key}-b/bootstrap", json=payload, headers=auth(issued)
        )
    return client.post(f"/v1/conversations/{key}-i/import", content=body, headers=auth(issued))


def test_each_heavy_route_waits_for_its_tenants_slot_and_others_pass(
    client: TestClient, db: Database, tenant: IssuedKey
) -> None:
    other = new_tenant(db, "other")
    for issued in (tenant, other):
        ingest(db, issued.tenant_id, f"k-{issued.tenant_name}", ["hello there", "hello again"])
    exported = call(client, other, "export", None)
    assert exported.status_code == 200
    export_body = exported.content

    for route, kind in [
        ("grep", HeavyKind.READ),
        ("export", HeavyKind.READ),
        ("bootstrap", HeavyKind.WRITE),
        ("import", HeavyKind.WRITE),
    ]:
        exhausted(client, tenant.tenant_id, kind)
        refused = call(client, tenant, route, export_body)
        assert refused.status_code == 429, (route, refused.text)
        assert refused.json()["error"]["code"] == "heavy_busy"
        assert int(refused.headers["Retry-After"]) >= 1
        passed = call(client, other, route, export_body)
        assert passed.status_code == 200, (route, passed.text)

    # Nothing the refused writes carried was stored; the other tenant's were.
    listed = client.get("/v1/conversations", headers=auth(tenant)).json()
    assert sorted(c["session_key"] for c in listed["conversations"]) == ["k-acme"]
    listed = client.get("/v1/conversations", headers=auth(other)).json()
    assert sorted(c["session_key"] for c in listed["conversations"]) == [
        "k-other",
        "k-other-b",
        "k-other-i",
    ]


def test_a_free_share_admits_heavy_requests_and_returns_every_slot(
    client: TestClient, db: Database, tenant: IssuedKey
) -> None:
    ingest(db, tenant.tenant_id, "k-acme", ["hello there"])
    heavy: HeavyShare = client.app.state.heavy_share  # type: ignore[attr-defined]
    assert (heavy.reads_per_tenant, heavy.writes_per_tenant, heavy.total) == (2, 1, 4)
    for _ in range(3):
        assert call(client, tenant, "grep", None).status_code == 200
        assert call(client, tenant, "bootstrap", None).status_code == 200
    assert heavy._tenants == {}


def test_console_search_waits_for_its_tenants_read_slot(
    client: TestClient, db: Database, tenant: IssuedKey
) -> None:
    ingest(db, tenant.tenant_id, "k-acme", ["hello there"])
    token = login_token(client.get("/console/login").text)
    signed = client.post("/console/login", data={"api_key": tenant.api_key, "login_token": token})
    assert signed.status_code in (200, 303), signed.text
    assert client.get("/console/search", params={"q": "hello"}).status_code == 200
    exhausted(client, tenant.tenant_id, HeavyKind.READ)
    refused = client.get("/console/search", params={"q": "hello"})
    assert refused.status_code == 429
    assert "text/html" in refused.headers["content-type"]
    assert "heavy_busy" in refused.text

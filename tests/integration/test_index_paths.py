"""An operator's calls and beat's reconciler find their rows through indexes.

The request path is checked in ``test_sharding.py``, the erasures in
``test_erasure.py`` and the grant sweep in ``test_retrieval_expand_query.py``;
this covers the rest of what an operator or a tenant's admin runs, whose
cost must follow what it touches, not every tenant's rows
(``tests/sql_plans.py``).
"""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from lcm.compaction.reconcile import overdue_debts
from lcm.db.engine import Database
from tests.conftest import auth, new_tenant
from tests.integration.retrieval_data import compact
from tests.sql_plans import recording, sequential_scans

BASE = "/v1/conversations/agent:main"

# (method, path, body, status): in this order, after one compacted conversation.
CALLS: list[tuple[str, str, dict[str, Any] | None, int]] = [
    ("GET", "/v1/conversations", None, 200),
    ("GET", "/v1/tenant/usage?since=2026-11-01", None, 200),
    ("GET", "/v1/tenant/doctor", None, 200),
    ("GET", "/v1/tenant/keys", None, 200),
    ("GET", "/v1/tenant/settings", None, 200),
    ("GET", f"{BASE}/export", None, 200),
    ("POST", f"{BASE}/compact", {}, 200),
    (
        "POST",
        "/v1/conversations/agent:child/fork",
        {"parent_session_key": "agent:main", "mode": "fork"},
        200,
    ),
    ("POST", "/v1/conversations/agent:child/fork/end", {}, 200),
    ("DELETE", "/v1/conversations/agent:child", None, 204),
]


def test_operator_calls_and_the_reconciler_read_no_table_whole(
    pg_db: Database, pg_client: TestClient
) -> None:
    tenant = new_tenant(pg_db)
    new_tenant(pg_db, "other")
    headers = auth(tenant)
    batch = [
        {"role": "user", "content": f"message {i}: rotated the cert on web-{i}", "id": f"m{i}"}
        for i in range(30)
    ]
    r = pg_client.post(f"{BASE}/messages", json={"messages": batch}, headers=headers)
    compact(pg_db, tenant.tenant_id, r.json()["conversation_id"])
    found: dict[str, list[str]] = {}
    for method, path, body, status in CALLS:
        with recording(pg_db.engine) as statements:
            r = pg_client.request(method, path, json=body, headers=headers)
        assert r.status_code == status, (path, r.text)
        assert statements, path
        found[f"{method} {path}"] = sequential_scans(pg_db.engine, statements)
    with recording(pg_db.engine) as statements:
        overdue_debts(pg_db.transaction, pg_db.settings, 0)
    found["reconcile"] = sequential_scans(pg_db.engine, statements)
    assert {name: scans for name, scans in found.items() if scans} == {}

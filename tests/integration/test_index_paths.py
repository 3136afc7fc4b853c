"""An operator's and an agent host's other calls, and beat's jobs, find their rows through indexes.

The request path is checked in ``test_sharding.py``, the erasures in
``test_erasure.py`` and the grant sweep in ``test_retrieval_expand_query.py``;
this covers the rest of what an operator, a tenant's admin or an agent
host's lifecycle runs, and beat's reconcilers and retention sweep, whose
cost must follow what they touch, not every tenant's rows
(``tests/sql_plans.py``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update

from lcm.compaction.reconcile import overdue_debts
from lcm.compaction.service import record_debt
from lcm.db.engine import Database
from lcm.db.models import CompactionDebt, LargeFile, Summary, utcnow
from lcm.erasure.retention import sweep_retention
from lcm.files.repository import LargeFileRepository
from lcm.files.storage import LocalFileStorage
from tests.conftest import RecordingSender, api_client, auth, new_tenant
from tests.e2e.test_console import csrf_token
from tests.e2e.test_console_snapshot import signed_in
from tests.integration.retrieval_data import compact, ingest
from tests.sql_plans import recording, rows_read, sequential_scans

ROOT = "/v1/conversations"
BASE = f"{ROOT}/agent:main"
FIXTURES = Path(__file__).parents[1] / "fixtures" / "transcripts"

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


def _cert_messages() -> list[dict[str, Any]]:
    """Thirty user messages with ids, enough for a leaf pass to compact."""
    return [
        {"role": "user", "content": f"message {i}: rotated the cert on web-{i}", "id": f"m{i}"}
        for i in range(30)
    ]


def _checked(
    db: Database,
    client: TestClient,
    found: dict[str, list[str]],
    method: str,
    path: str,
    status: int,
    **kwargs: Any,
) -> Any:
    """Make the call, expect ``status``, and file its scans under ``found``; the response."""
    with recording(db.engine) as statements:
        r = client.request(method, path, **kwargs)
    assert r.status_code == status, (path, r.text)
    assert statements, path
    found[f"{method} {path}"] = sequential_scans(db.engine, statements)
    return r


def _report(found: dict[str, list[str]]) -> str:
    """Each call that scanned, with the statements and plans that did."""
    return "\n\n".join(f"{name}:\n" + "\n".join(scans) for name, scans in found.items() if scans)


@pytest.fixture
def files_client(pg_db: Database, tmp_path: Path) -> Iterator[TestClient]:
    """The API on the test Postgres, its large files under ``tmp_path``."""
    settings = pg_db.settings.model_copy(update={"files_dir": tmp_path / "files"})
    yield from api_client(settings, pg_db, RecordingSender())


def test_operator_calls_and_the_reconciler_read_no_table_whole(
    pg_db: Database, pg_client: TestClient
) -> None:
    tenant = new_tenant(pg_db)
    new_tenant(pg_db, "other")
    headers = auth(tenant)
    batch = _cert_messages()
    r = pg_client.post(f"{BASE}/messages", json={"messages": batch}, headers=headers)
    compact(pg_db, tenant.tenant_id, r.json()["conversation_id"])
    found: dict[str, list[str]] = {}
    for method, path, body, status in CALLS:
        _checked(pg_db, pg_client, found, method, path, status, json=body, headers=headers)
    with recording(pg_db.engine) as statements:
        overdue_debts(pg_db.transaction, pg_db.settings, 0)
    found["reconcile"] = sequential_scans(pg_db.engine, statements)
    assert not any(found.values()), _report(found)


def test_the_rest_of_a_tenants_calls_and_beats_sweeps_read_no_table_whole(
    pg_db: Database, files_client: TestClient, tmp_path: Path
) -> None:
    """Lifecycle calls, keys, settings, a large file; beat's retention sweep and file reconciler."""
    tenant = new_tenant(pg_db)
    new_tenant(pg_db, "other")
    headers = auth(tenant)
    found: dict[str, list[str]] = {}

    def call(method: str, path: str, status: int, **kwargs: Any) -> Any:
        return _checked(pg_db, files_client, found, method, path, status, headers=headers, **kwargs)

    pasted = json.dumps([{"id": i, "host": f"web-{i}"} for i in range(4_000)])
    batch = _cert_messages()
    batch.append({"role": "user", "content": f'<file name="hosts.json">{pasted}</file>'})
    r = call("POST", f"{BASE}/messages", 200, json={"messages": batch})
    compact(pg_db, tenant.tenant_id, r.json()["conversation_id"])
    with pg_db.session() as s:
        file_id = s.scalars(select(LargeFile.id)).one()
    call("GET", f"/v1/files/{file_id}", 200)
    turn = [
        {"role": "user", "content": "and web-31?"},
        {"role": "assistant", "content": "done"},
    ]
    commit = {"advancement_key": "turn-1", "messages": turn, "token_budget": 100_000}
    call("POST", f"{BASE}/commits", 200, json=commit)
    transcript = (FIXTURES / "pi_v3_branches.jsonl").read_text()
    call("POST", f"{ROOT}/agent:boot/bootstrap", 200, json={"transcript_jsonl": transcript})
    exported = call("GET", f"{ROOT}/agent:boot/export", 200)  # one without a file
    call("POST", f"{ROOT}/agent:copy/import", 200, content=exported.content)
    fork = {"parent_session_key": "agent:main", "mode": "fork"}
    call("POST", f"{ROOT}/agent:child/fork", 200, json=fork)
    call("POST", f"{ROOT}/agent:child/fork/rollback", 200)
    call("POST", f"{BASE}/session", 200, json={"mode": "new"})
    call("POST", f"{ROOT}/agent:copy/session", 200, json={"mode": "reset"})
    call("POST", "/v1/tenant/doctor/apply", 200, json={})
    key_id = call("POST", "/v1/tenant/keys", 201, json={"name": "ci"}).json()["id"]
    call("POST", f"/v1/tenant/keys/{key_id}/revoke", 200)
    call("PATCH", "/v1/tenant/settings", 200, json={"retention_days": 30})
    with recording(pg_db.engine) as statements, pg_db.read_session() as s:
        assert LargeFileRepository(s).missing_summaries(utcnow() + timedelta(hours=1), 500)
    found["files reconcile"] = sequential_scans(pg_db.engine, statements)
    storage = LocalFileStorage(tmp_path / "files")
    later = utcnow() + timedelta(days=31)
    with recording(pg_db.engine) as statements:
        swept = sweep_retention(
            pg_db.transaction, pg_db.read_session, storage, pg_db.settings, later
        )
    assert swept.erased  # the sweep did its work, so its statements are all here
    found["retention sweep"] = sequential_scans(pg_db.engine, statements)
    assert not any(found.values()), _report(found)


def test_the_consoles_pages_and_forms_read_no_table_whole(
    pg_db: Database, pg_client: TestClient
) -> None:
    tenant = new_tenant(pg_db)
    new_tenant(pg_db, "other")
    batch = _cert_messages()
    r = pg_client.post(f"{BASE}/messages", json={"messages": batch}, headers=auth(tenant))
    cid = r.json()["conversation_id"]
    compact(pg_db, tenant.tenant_id, cid)
    with pg_db.session() as s:
        summary_id = s.scalars(select(Summary.id)).first()
    signed_in(pg_client, tenant.api_key)
    csrf = csrf_token(pg_client.get("/console/live").text)
    form = {"conversation_id": str(cid), "csrf_token": csrf}
    calls: list[tuple[str, str, dict[str, str] | None, int]] = [
        ("GET", "/console/conversations", None, 200),
        ("GET", f"/console/conversations/{cid}", None, 200),
        ("GET", f"/console/conversations/{cid}/messages?seq=1", None, 200),
        ("GET", f"/console/summaries/{summary_id}", None, 200),
        ("GET", "/console/search?q=cert", None, 200),
        ("GET", f"/console/search?q=web-1&mode=regex&conversation={cid}", None, 200),
        ("GET", "/console/live", None, 200),
        ("POST", "/console/live/compact", form, 303),
        ("POST", "/console/live/retry", form, 303),
    ]
    found: dict[str, list[str]] = {}
    for method, path, data, status in calls:
        _checked(pg_db, pg_client, found, method, path, status, data=data, follow_redirects=False)
    assert not any(found.values()), _report(found)


def test_the_metrics_scrape_reads_only_unfinished_debt(
    pg_db: Database, pg_client: TestClient
) -> None:
    """A scrape's cost follows the backlog, not every conversation ever compacted."""
    tenant = new_tenant(pg_db)
    ids = [ingest(pg_db, tenant.tenant_id, f"agent:{n}", [f"hello {n}"]) for n in range(60)]
    with pg_db.transaction() as s:
        for cid in ids:
            record_debt(s, tenant.tenant_id, cid, "threshold", None)
        unfinished = {ids[0]: "pending", ids[1]: "pending", ids[2]: "failed"}
        s.execute(update(CompactionDebt).values(status="done"))
        for cid, status in unfinished.items():
            s.execute(
                update(CompactionDebt)
                .where(CompactionDebt.conversation_id == cid)
                .values(status=status)
            )
    with recording(pg_db.engine) as statements:
        metrics = pg_client.get("/metrics").text
    assert 'lcm_compaction_debt{status="pending"} 2.0' in metrics
    assert 'lcm_compaction_debt{status="failed"} 1.0' in metrics
    # The counts read the three unfinished rows, the oldest age the two pending.
    assert rows_read(pg_db.engine, statements) <= 2 * len(unfinished)

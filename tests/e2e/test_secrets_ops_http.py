"""The secret scan and report endpoints over HTTP, on both databases.

A scan is started (202), conflicts while it runs (409), runs as its worker
job would and is read back done; the report counts each tenant's findings
only.
"""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from lcm.db.engine import Database
from lcm.job_types import ScanSecrets
from lcm.secrets import run_scan_job
from lcm.tenants.service import IssuedKey
from tests.conftest import RecordingSender, auth, new_tenant

SCANS = "/v1/tenant/secrets/scans"
REPORT = "/v1/tenant/secrets/report"
KEY_A = "AKIA" + "QWER" * 4
ACME = "acme_live_" + "Q7w2" * 6


def ingest(client: TestClient, tenant: IssuedKey, key: str, texts: list[str]) -> int:
    body = {
        "messages": [{"role": "user", "content": t, "id": f"m{i}"} for i, t in enumerate(texts)]
    }
    r = client.post(f"/v1/conversations/{key}/messages", headers=auth(tenant), json=body)
    assert r.status_code == 200, r.text
    return int(r.json()["conversation_id"])


def report(client: TestClient, tenant: IssuedKey, **query: Any) -> list[dict[str, Any]]:
    r = client.get(REPORT, headers=auth(tenant), params=query)
    assert r.status_code == 200, r.text
    return list(r.json()["conversations"])


def test_a_scan_runs_once_per_scope_and_the_report_follows(
    client: TestClient, tenant: IssuedKey, db: Database, sender: RecordingSender
) -> None:
    cid = ingest(client, tenant, "ops", [f"key {KEY_A}", f"token {ACME}", f"again {KEY_A}"])
    other = new_tenant(db, "other")
    ingest(client, other, "theirs", [f"their key {KEY_A}"])
    assert report(client, tenant) == [
        {
            "conversation_id": cid,
            "session_key": "ops",
            "spans": 2,
            "kinds": {"aws_key": {"spans": 2, "values": 1}},
        }
    ]

    rule = {"kind": "acme_key", "pattern": r"acme_live_\w{24}"}
    patched = client.patch(
        "/v1/tenant/settings", headers=auth(tenant), json={"secrets_custom_patterns": [rule]}
    )
    assert patched.status_code == 200, patched.text
    started = client.post(SCANS, headers=auth(tenant), json={"session_key": "ops"})
    assert started.status_code == 202, started.text
    scan = started.json()
    assert (scan["status"], scan["conversation_id"], scan["messages_total"]) == ("pending", cid, 3)
    assert ScanSecrets(scan["id"]) in sender.jobs  # sent once the request committed

    busy = client.post(SCANS, headers=auth(tenant), json={"conversation_id": cid})
    assert busy.status_code == 409, busy.text
    assert busy.json()["error"]["code"] == "secret_scan_running"
    # Another tenant neither sees this scan nor can name this conversation.
    assert client.get(f"{SCANS}/{scan['id']}", headers=auth(other)).status_code == 404
    stranger = client.post(SCANS, headers=auth(other), json={"conversation_id": cid})
    assert stranger.status_code == 404, stranger.text

    assert run_scan_job(db.transaction, scan["id"], "test-worker", db.settings) == "done"
    done = client.get(f"{SCANS}/{scan['id']}", headers=auth(tenant)).json()
    assert (done["status"], done["messages_done"], done["spans_written"]) == ("done", 3, 3)
    assert report(client, tenant, conversation_id=cid)[0]["kinds"] == {
        "acme_key": {"spans": 1, "values": 1},
        "aws_key": {"spans": 2, "values": 1},
    }
    assert [c["session_key"] for c in report(client, other)] == ["theirs"]


def test_bad_scan_requests_are_4xx_with_a_json_error(client: TestClient, tenant: IssuedKey) -> None:
    both = {"conversation_id": 1, "session_key": "ops"}
    for body, status in (
        (both, 400),
        ({"conversation_id": 0}, 400),
        ({"rescan_all": "maybe"}, 400),
        ({"extra": 1}, 400),
        ({"session_key": "nobody"}, 404),
        ({"conversation_id": 999_999}, 404),
    ):
        r = client.post(SCANS, headers=auth(tenant), json=body)
        assert r.status_code == status, (body, r.text)
        assert "code" in r.json()["error"]

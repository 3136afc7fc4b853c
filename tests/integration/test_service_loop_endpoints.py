"""The service loop from the API: waiting for debt, inline sweeps, the endpoints (no broker)."""

from __future__ import annotations

import threading
import time

import pytest
from fastapi.testclient import TestClient

from lcm.compaction.service import record_debt, wait_for_debt
from lcm.completions import Completions, debt_key
from lcm.content import IncomingMessage
from lcm.db.engine import Database
from lcm.db.models import utcnow
from lcm.tenants.service import IssuedKey, update_overrides
from tests.conftest import RecordingSender, auth
from tests.integration.service_loop import (
    BUDGET,
    SMALL,
    Clock,
    debt_of,
    drain,
    jobs_for,
    turn,
)
from tests.integration.test_compaction_engine import assert_lossless


@pytest.mark.parametrize("woken", [True, False], ids=["woken", "wake-up-lost"])
def test_wait_for_debt_answers_done_once_the_sweep_committed(
    client: TestClient, tenant: IssuedKey, db: Database, woken: bool
) -> None:
    cid = turn(client, tenant, 60)["conversation_id"]
    hub = Completions()
    asked_at = utcnow()

    def worker() -> None:
        time.sleep(0.1)
        assert drain(jobs_for(db, Clock(), "w1"), cid)[-1].action == "done"
        if woken:
            hub.notify(debt_key(cid))

    threading.Thread(target=worker).start()
    # Woken: a re-check interval past the deadline, so only the wake-up ends
    # the wait with "done". Lost: the re-check finds the committed row.
    recheck = 60.0 if woken else 0.05
    assert wait_for_debt(db.transaction, cid, asked_at, 30, hub, recheck) == "done"
    assert debt_of(db, cid).status == "done"
    assert_lossless(db, cid)


def test_wait_for_debt_meets_its_deadline_when_nothing_settles(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    cid = turn(client, tenant, 60)["conversation_id"]
    hub = Completions()
    threading.Timer(0.05, lambda: hub.notify(debt_key(cid))).start()  # a wake-up, nothing done
    started = time.monotonic()
    assert wait_for_debt(db.transaction, cid, utcnow(), 0.3, hub, 60) == "pending"
    assert 0.3 <= time.monotonic() - started < 30


def test_inline_mode_runs_the_sweep_in_the_request(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    with db.transaction() as s:
        update_overrides(s, tenant.tenant_id, {"compaction_mode": "inline", **SMALL})
    out = turn(client, tenant, 60)
    assert out["compaction"] == "ran"
    assert debt_of(db, out["conversation_id"]).status == "done"
    assert_lossless(db, out["conversation_id"])


def test_assemble_and_manual_compact_endpoints(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    with db.transaction() as s:
        update_overrides(s, tenant.tenant_id, {"compaction_mode": "inline", **SMALL})
    turn(client, tenant, 30, budget=1_000_000)  # far below threshold: nothing compacts
    r = client.post(
        "/v1/conversations/k/compact",
        headers=auth(tenant),
        json={"target_tokens": 500, "token_budget": BUDGET, "wait": True},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "done"
    assert body["context_tokens_after"] < body["context_tokens_before"]
    a = client.post(
        "/v1/conversations/k/assemble", headers=auth(tenant), json={"token_budget": BUDGET}
    ).json()
    assert a["summary_count"] >= 1
    assert a["fresh_tail_count"] == 4
    assert a["estimated_tokens"] <= BUDGET
    assert a["messages"][0]["role"] == "user"
    assert (
        client.post(
            "/v1/conversations/nope/assemble", headers=auth(tenant), json={"token_budget": 100}
        ).status_code
        == 404
    )


def test_manual_compact_without_a_worker_reports_pending(
    client: TestClient, tenant: IssuedKey, sender: RecordingSender
) -> None:
    cid = turn(client, tenant, 10, budget=1_000_000)["conversation_id"]
    r = client.post("/v1/conversations/k/compact", headers=auth(tenant), json={"wait": 0.3})
    assert r.json()["status"] == "pending"
    assert sender.woken == [cid]


def test_tenant_settings_endpoint(client: TestClient, tenant: IssuedKey) -> None:
    r = client.patch(
        "/v1/tenant/settings",
        headers=auth(tenant),
        json={"fresh_tail_count": 12, "custom_instructions": "Keep ticket ids."},
    )
    assert r.status_code == 200
    assert r.json()["effective"]["fresh_tail_count"] == 12
    bad = client.patch("/v1/tenant/settings", headers=auth(tenant), json={"fresh_tail_count": 0})
    assert bad.status_code == 400
    unknown = client.patch("/v1/tenant/settings", headers=auth(tenant), json={"database_url": "x"})
    refused = unknown.json()["error"]["message"]
    assert unknown.status_code == 400
    assert "database_url: unknown field" in refused
    cleared = client.patch(
        "/v1/tenant/settings", headers=auth(tenant), json={"fresh_tail_count": None}
    )
    assert cleared.json()["overrides"] == {"custom_instructions": "Keep ticket ids."}


def test_record_debt_is_one_row_per_conversation(db: Database, tenant: IssuedKey) -> None:
    from tests.integration.test_ingest import ingest

    cid = ingest(db, tenant.tenant_id, "k", [IncomingMessage("user", "x")]).conversation_id
    with db.transaction() as s:
        assert record_debt(s, tenant.tenant_id, cid, "threshold", 100) is True
    with db.transaction() as s:
        assert record_debt(s, tenant.tenant_id, cid, "manual", 100, 50) is False
    debt = debt_of(db, cid)
    assert (debt.reason, debt.target_tokens, debt.status) == ("manual", 50, "pending")


@pytest.mark.parametrize("budget", [0, -5])
def test_turn_budget_must_be_positive(client: TestClient, tenant: IssuedKey, budget: int) -> None:
    r = client.post(
        "/v1/conversations/k/turns",
        headers=auth(tenant),
        json={"messages": [], "token_budget": budget},
    )
    assert r.status_code == 400

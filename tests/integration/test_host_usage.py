"""``usage`` on …/turns and …/commits: the host's model tokens, cache reads and writes,
stored once per turn and summed by GET /v1/tenant/usage (SQLite and Postgres)."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select

from lcm.db.engine import Database
from lcm.db.models import HostUsage
from lcm.tenants.service import IssuedKey
from tests.conftest import auth, new_tenant
from tests.e2e.test_console_snapshot import signed_in

USAGE = {
    "input_tokens": 1_200,
    "output_tokens": 300,
    "cache_read_tokens": 90_000,
    "cache_write_tokens": 4_000,
}


def turn(n: int, usage: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "messages": [{"role": "assistant", "content": f"reply {n}", "id": f"a{n}"}],
        "token_budget": 200_000,
        **extra,
    }
    if usage is not None:
        body["usage"] = usage
    return body


def test_turn_usage_is_summed_by_day_and_model(
    db: Database, tenant: IssuedKey, client: TestClient
) -> None:
    headers = auth(tenant)
    other = new_tenant(db, "other-host")
    path = "/v1/conversations/host-usage/turns"
    r = client.post(path, json=turn(1, USAGE, model="claude-sonnet-4-5"), headers=headers)
    assert r.status_code == 200, r.text
    r = client.post(path, json=turn(2, {**USAGE, "cache_write_tokens": 0}), headers=headers)
    assert r.status_code == 200, r.text
    # A turn without usage and another tenant's turn count nowhere here.
    assert client.post(path, json=turn(3), headers=headers).status_code == 200
    client.post(path, json=turn(1, USAGE), headers=auth(other))

    body = client.get("/v1/tenant/usage", headers=headers).json()
    # The second turn named no model: the conversation's remembered one counts.
    [line] = body["host_usage"]
    assert line["model"] == "claude-sonnet-4-5"
    assert (line["turns"], line["input_tokens"], line["output_tokens"]) == (2, 2_400, 600)
    assert (line["cache_read_tokens"], line["cache_write_tokens"]) == (180_000, 4_000)
    assert body["host"] == {
        "turns": 2,
        "input_tokens": 2_400,
        "output_tokens": 600,
        "cache_read_tokens": 180_000,
        "cache_write_tokens": 4_000,
        "cache_read_share": round(180_000 / (180_000 + 2_400 + 4_000), 4),
    }
    # The host's tokens are not lcm's LLM use: the summarizer's totals stay empty.
    assert (body["input_tokens"], body["output_tokens"], body["usage"]) == (0, 0, [])


def test_a_retried_turn_counts_its_usage_once(
    db: Database, tenant: IssuedKey, client: TestClient
) -> None:
    headers = auth(tenant)
    path = "/v1/conversations/host-retry/turns"
    for _ in range(2):  # the second delivery: every message a duplicate
        r = client.post(path, json=turn(1, USAGE), headers=headers)
        assert r.status_code == 200, r.text
    commit = {**turn(2, USAGE), "advancement_key": "adv-2"}
    for _ in range(2):  # a replayed commit is a duplicate too
        r = client.post("/v1/conversations/host-retry/commits", json=commit, headers=headers)
        assert r.status_code == 200, r.text
    with db.read_session() as session:
        rows = session.scalars(select(HostUsage).where(HostUsage.tenant_id == tenant.tenant_id))
        assert [(row.input_tokens, row.cache_read_tokens) for row in rows] == [
            (1_200, 90_000),
            (1_200, 90_000),
        ]
    assert client.get("/v1/tenant/usage", headers=headers).json()["host"]["turns"] == 2


def test_bad_usage_is_refused_and_stores_nothing(
    db: Database, tenant: IssuedKey, client: TestClient
) -> None:
    headers = auth(tenant)
    path = "/v1/conversations/host-bad/turns"
    for usage in ({"cache_read_tokens": -1}, {"input_tokens": 10**10}, {"cached": 5}):
        r = client.post(path, json=turn(1, usage), headers=headers)
        assert r.status_code == 400, r.text
        assert r.json()["error"]["code"]
    status = client.get("/v1/conversations/host-bad/status", headers=headers)
    assert status.status_code == 404  # not even the conversation was created
    assert client.get("/v1/tenant/usage", headers=headers).json()["host"]["turns"] == 0


def test_the_console_usage_page_shows_cache_tokens(
    db: Database, tenant: IssuedKey, client: TestClient
) -> None:
    path = "/v1/conversations/host-console/turns"
    r = client.post(path, json=turn(1, USAGE, model="claude-sonnet-4-5"), headers=auth(tenant))
    assert r.status_code == 200, r.text
    signed_in(client, tenant.api_key)
    page = client.get("/console/usage")
    assert page.status_code == 200, page.text
    assert "claude-sonnet-4-5" in page.text
    assert "90,000 cache read" in page.text
    assert "4,000 cache write" in page.text
    assert "94.5%" in page.text  # 90,000 of 95,200 prompt tokens came from the cache
    assert client.get("/console/usage", params={"days": "0"}).status_code == 400

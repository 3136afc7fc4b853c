"""GET /v1/tenant/usage: llm_usage rows summed by UTC day and model, priced from settings."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi.testclient import TestClient

from lcm.content import IncomingMessage
from lcm.db.engine import Database
from lcm.db.models import LlmUsage, Summary
from lcm.ingest.service import ingest_messages, prepare_batch
from lcm.tenants.service import IssuedKey
from tests.conftest import auth, new_tenant

DAY1 = datetime(2026, 11, 20, 23, 59, 30, tzinfo=UTC)
DAY2 = datetime(2026, 11, 21, 0, 0, 30, tzinfo=UTC)


def usage(tenant_id: str, model: str, at: datetime, tokens_in: int, tokens_out: int) -> LlmUsage:
    return LlmUsage(
        tenant_id=tenant_id,
        model=model,
        purpose="summary",
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        created_at=at,
    )


def seed(db: Database, tenant_id: str) -> None:
    with db.transaction() as session:
        batch = prepare_batch([IncomingMessage("user", "hi", None)], max_batch=1, max_chars=100)
        conversation_id = ingest_messages(session, tenant_id, "k", None, batch).conversation_id
        session.add_all(
            [
                usage(tenant_id, "claude-haiku-4-5-20251001", DAY1, 1_000_000, 200_000),
                usage(tenant_id, "claude-haiku-4-5-20251001", DAY1, 500_000, 100_000),
                usage(tenant_id, "claude-haiku-4-5-20251001", DAY2, 2_000, 1_000),
                usage(tenant_id, "house-model", DAY2, 10, 5),
                usage(tenant_id, "claude-haiku-4-5", datetime(2026, 10, 1, tzinfo=UTC), 9, 9),
            ]
        )
        for n, (model, at) in enumerate(
            [("claude-haiku-4-5-20251001", DAY1), ("offline-extractive", DAY2)]
        ):
            session.add(
                Summary(
                    id=f"sum_{tenant_id[-8:]}{n:08x}",
                    tenant_id=tenant_id,
                    conversation_id=conversation_id,
                    kind="leaf",
                    depth=0,
                    content="s",
                    token_count=1,
                    earliest_at=at,
                    latest_at=at,
                    descendant_count=1,
                    escalation="normal",
                    model=model,
                    created_at=at,
                )
            )


def test_usage_by_day_and_model(db: Database, tenant: IssuedKey, client: TestClient) -> None:
    seed(db, tenant.tenant_id)
    seed(db, new_tenant(db, "other").tenant_id)  # never in this tenant's figures

    r = client.get("/v1/tenant/usage", params={"since": "2026-11-01"}, headers=auth(tenant))
    assert r.status_code == 200, r.text
    body = r.json()
    lines = {(line["day"], line["model"]): line for line in body["usage"]}
    assert list(lines) == [
        ("2026-11-20", "claude-haiku-4-5-20251001"),
        ("2026-11-21", "claude-haiku-4-5-20251001"),
        ("2026-11-21", "house-model"),
        ("2026-11-21", "offline-extractive"),
    ]
    day1 = lines[("2026-11-20", "claude-haiku-4-5-20251001")]
    # $1 / $5 per million tokens (the haiku 4.5 default price, found by prefix).
    assert day1 == {
        "day": "2026-11-20",
        "model": "claude-haiku-4-5-20251001",
        "calls": 2,
        "passes": 1,
        "input_tokens": 1_500_000,
        "output_tokens": 300_000,
        "estimated_cost_usd": 3.0,
    }
    assert lines[("2026-11-21", "claude-haiku-4-5-20251001")]["estimated_cost_usd"] == 0.007
    assert lines[("2026-11-21", "house-model")]["estimated_cost_usd"] is None
    offline = lines[("2026-11-21", "offline-extractive")]
    assert (offline["calls"], offline["passes"], offline["estimated_cost_usd"]) == (0, 1, 0.0)
    assert body["input_tokens"] == 1_502_010
    assert body["output_tokens"] == 301_005
    assert body["passes"] == 2
    assert body["estimated_cost_usd"] == 3.007
    assert body["unpriced_models"] == ["house-model"]

    # ``since`` is a timestamp too: only the second day is left.
    r = client.get(
        "/v1/tenant/usage", params={"since": "2026-11-21T00:00:00Z"}, headers=auth(tenant)
    )
    assert {line["day"] for line in r.json()["usage"]} == {"2026-11-21"}


def test_usage_is_documented(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    operation = schema["paths"]["/v1/tenant/usage"]["get"]
    ok = operation["responses"]["200"]["content"]["application/json"]["schema"]
    assert ok == {"$ref": "#/components/schemas/UsageOut"}
    assert "429" in operation["responses"]
    assert [p["name"] for p in operation["parameters"]] == ["since"]

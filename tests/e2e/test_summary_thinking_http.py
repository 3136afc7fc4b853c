"""Extended thinking on Anthropic summaries, over HTTP (inline compaction, both databases).

The fake Messages API sees ``thinking`` with the tenant's budget, answers
with a thinking block before the text as the API does, and the summary
keeps the text only; the thinking's tokens are counted in usage.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from lcm.db.engine import Database
from lcm.db.models import LlmUsage, Summary
from lcm.tenants.service import IssuedKey
from lcm.tokens import estimate_tokens
from tests.conftest import auth
from tests.e2e.test_guards_http import SMALL, configure, messages, turn
from tests.fakes import FakeAnthropicServer
from tests.fakes.anthropic_script import THOUGHT


def test_thinking_reaches_the_model_and_stays_out_of_the_summary(
    db: Database, tenant: IssuedKey, llm: FakeAnthropicServer, llm_client: TestClient
) -> None:
    configure(
        llm_client,
        tenant,
        **SMALL,
        summary_model="claude-test",
        enable_summary_thinking=True,
        summary_thinking_budget_tokens=1_500,
    )
    turn(llm_client, tenant, messages(0, 30))
    assert llm.requests
    for sent in llm.requests:
        assert sent.body["thinking"] == {"type": "enabled", "budget_tokens": 1_500}
        assert sent.max_tokens is not None
        assert sent.max_tokens > 1_500
    with db.session() as s:
        written = list(s.scalars(select(Summary)))
        outputs = list(s.scalars(select(LlmUsage.output_tokens)))
    assert written
    assert all(x.degraded is None and x.model == "claude-test" for x in written)
    assert all(THOUGHT not in x.content for x in written)
    # Each call's output counts its thinking block as well as its text.
    thinking = estimate_tokens(json.dumps({"type": "thinking", "thinking": THOUGHT}))
    assert min(outputs) > thinking
    r = llm_client.get("/v1/tenant/usage", headers=auth(tenant))
    lines = r.json()["by_purpose"]
    assert [(x["purpose"], x["provider"], x["model"]) for x in lines] == [
        ("summary", "anthropic", "claude-test")
    ]
    assert lines[0]["calls"] == len(outputs)


def test_without_thinking_no_thinking_is_asked(
    db: Database, tenant: IssuedKey, llm: FakeAnthropicServer, llm_client: TestClient
) -> None:
    configure(llm_client, tenant, **SMALL, summary_model="claude-test")
    turn(llm_client, tenant, messages(0, 30))
    assert llm.requests
    assert all("thinking" not in sent.body for sent in llm.requests)


@pytest.mark.parametrize(
    "change",
    [
        {"summary_provider": "gemini"},
        {"summary_model_rules": [{"depth_min": 2, "depth_max": 1, "model": "m"}]},
        {"summary_model_rules": [{"depth_min": 0}]},
        {"summary_thinking_budget_tokens": 100},
        {"large_file_summary_provider": "local"},
    ],
)
def test_bad_provider_settings_are_refused_whole(
    client: TestClient, tenant: IssuedKey, change: dict[str, Any]
) -> None:
    r = client.patch("/v1/tenant/settings", json=change, headers=auth(tenant))
    assert 400 <= r.status_code < 500, r.text
    assert "error" in r.json()
    after = client.get("/v1/tenant/settings", headers=auth(tenant)).json()
    assert after["overrides"] == {}

"""``summary_model_overrides`` over HTTP: the summary model chosen by session-key glob."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from lcm.db.engine import Database
from lcm.db.models import Summary
from lcm.tenants.service import IssuedKey
from tests.conftest import auth
from tests.fakes import FakeAnthropicServer

SMALL: dict[str, Any] = {
    "compaction_mode": "inline",
    "fresh_tail_count": 6,
    "leaf_min_fanout": 4,
    "leaf_chunk_tokens": 600,
    "condensed_min_fanout": 3,
    "summary_model": "claude-plain",
}
RULES = [
    {"session_pattern": "agent:*:telegram:**", "summary_model": "claude-chat"},
    {"session_pattern": "agent:**", "summary_model": "claude-agent"},
    # Never reached for agent keys: the rule above matched first.
    {"session_pattern": "agent:main:**", "summary_model": "claude-unreachable"},
]


def patch(client: TestClient, tenant: IssuedKey, **values: Any) -> Any:
    return client.patch("/v1/tenant/settings", headers=auth(tenant), json=values)


def compact(client: TestClient, tenant: IssuedKey, key: str) -> int:
    batch = [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"step {i}: we moved the deploy checks to the nightly job, then "
            "verified the database migration and the backup restore " * 2,
        }
        for i in range(30)
    ]
    r = client.post(
        f"/v1/conversations/{key}/turns",
        json={"messages": batch, "token_budget": 2_000},
        headers=auth(tenant),
    )
    assert r.status_code == 200, r.text
    assert r.json()["compaction"] == "ran", r.text
    return int(r.json()["conversation_id"])


def summary_models(db: Database, conversation_id: int) -> set[str]:
    with db.session() as s:
        found = s.scalars(select(Summary.model).where(Summary.conversation_id == conversation_id))
        return set(found)


def test_conversations_matching_different_globs_use_different_models(
    db: Database, tenant: IssuedKey, llm: FakeAnthropicServer, llm_client: TestClient
) -> None:
    r = patch(llm_client, tenant, **SMALL, summary_model_overrides=RULES)
    assert r.status_code == 200, r.text

    chat = compact(llm_client, tenant, "agent:main:telegram:dm:42")
    seen = len(llm.requests)
    assert seen > 0
    assert {r.model for r in llm.requests} == {"claude-chat"}

    agent = compact(llm_client, tenant, "agent:main:cron")
    assert {r.model for r in llm.requests[seen:]} == {"claude-agent"}
    seen = len(llm.requests)

    plain = compact(llm_client, tenant, "ops-console")
    assert {r.model for r in llm.requests[seen:]} == {"claude-plain"}

    assert summary_models(db, chat) == {"claude-chat"}
    assert summary_models(db, agent) == {"claude-agent"}
    assert summary_models(db, plain) == {"claude-plain"}


def test_a_rule_may_name_its_own_fallbacks(
    db: Database, tenant: IssuedKey, llm: FakeAnthropicServer, llm_client: TestClient
) -> None:
    rule = {
        "session_pattern": "batch:**",
        "summary_model": "claude-down",
        "summary_fallback_models": ["claude-spare"],
    }
    r = patch(llm_client, tenant, **SMALL, summary_model_overrides=[rule])
    assert r.status_code == 200, r.text
    llm.set_default("500", model="claude-down")
    conversation = compact(llm_client, tenant, "batch:7")
    assert summary_models(db, conversation) == {"claude-spare"}
    assert "claude-plain" not in {r.model for r in llm.requests}


@pytest.mark.parametrize(
    "rules",
    [
        [{"session_pattern": "", "summary_model": "m"}],
        [{"session_pattern": "agent:***", "summary_model": "m"}],
        [{"session_pattern": "agent:\n", "summary_model": "m"}],
        [{"session_pattern": "a:*", "summary_model": ""}],
        [{"session_pattern": "a:*"}],
        [{"session_pattern": "a:*", "summary_model": "m", "provider_hint": "x"}],
        [{"session_pattern": "a:*", "summary_model": "m", "summary_fallback_models": [""]}],
        {"session_pattern": "a:*", "summary_model": "m"},
        ["a:*"],
    ],
)
def test_bad_rules_are_refused_whole(client: TestClient, tenant: IssuedKey, rules: Any) -> None:
    r = patch(client, tenant, summary_model="kept", summary_model_overrides=rules)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == "invalid_input"
    got = client.get("/v1/tenant/settings", headers=auth(tenant)).json()
    assert "summary_model_overrides" not in got["overrides"]
    assert "summary_model" not in got["overrides"]  # nothing of the batch was stored


def test_rules_are_stored_and_served_back(client: TestClient, tenant: IssuedKey) -> None:
    r = patch(client, tenant, summary_model_overrides=RULES[:1])
    assert r.status_code == 200, r.text
    got = client.get("/v1/tenant/settings", headers=auth(tenant)).json()
    assert got["overrides"]["summary_model_overrides"] == [
        {**RULES[0], "summary_fallback_models": None}
    ]
    assert got["effective"]["summary_model_overrides"][0]["summary_model"] == "claude-chat"

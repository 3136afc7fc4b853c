"""Signed reasoning is replayed only to the model that wrote it, over HTTP on both backends.

Assistant messages with signed thinking by model A and by model B: assembling
for A keeps A's thinking and drops B's, and the other way round; every tool
pair stays whole and the result is a valid Messages API request. Without a
target model nothing changes. (Only the last assistant message of a context
carries thinking at all, by the normalizer's rule, so the open tool loop is
where it shows.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select

from lcm.assembly import api_violations
from lcm.db.engine import Database
from lcm.db.models import Message
from lcm.tenants.service import IssuedKey
from tests.conftest import auth
from tests.e2e.test_sessions_http import post

FIXTURES = Path(__file__).parents[1] / "fixtures" / "transcripts"

A = {"provider": "anthropic", "model": "claude-sonnet-4-5"}
B = {"provider": "anthropic", "model": "claude-opus-4-5"}


def call(name: str, identity: dict[str, str]) -> dict[str, Any]:
    """An assistant message by ``identity``: signed and redacted thinking, text, a tool call."""
    blocks: list[dict[str, Any]] = [
        {"type": "thinking", "thinking": f"plan {name}", "signature": f"SIG-{name}"},
        {"type": "redacted_thinking", "data": f"REDACTED-{name}"},
        {"type": "text", "text": f"reading {name}"},
        {"type": "tool_use", "id": f"toolu_{name}", "name": "read", "input": {"path": name}},
    ]
    return {"role": "assistant", "id": f"{name}-call", "content": blocks, **identity}


def result(*names: str) -> dict[str, Any]:
    blocks = [
        {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": f"contents of {n}"}
        for n in names
    ]
    return {"role": "user", "id": "result-" + "-".join(names), "content": blocks}


def ask(name: str) -> dict[str, Any]:
    return {"role": "user", "id": f"{name}-ask", "content": f"look at {name}"}


def store(client: TestClient, tenant: IssuedKey, batch: list[dict[str, Any]]) -> None:
    r = post(client, tenant, "k", "messages", {"messages": batch})
    assert r.status_code == 200, r.text


def assembled(client: TestClient, tenant: IssuedKey, names: str, **target: str) -> str:
    r = post(client, tenant, "k", "assemble", {"token_budget": 100_000, **target})
    assert r.status_code == 200, r.text
    messages = r.json()["messages"]
    assert api_violations(messages) == []
    text = json.dumps(messages)
    for name in names:  # every tool pair whole, the visible text kept
        assert f'"id": "toolu_{name}"' in text
        assert f'"tool_use_id": "toolu_{name}"' in text
        assert f"reading {name}" in text
    return text


def signed(text: str, name: str) -> list[bool]:
    return [f"SIG-{name}" in text, f"REDACTED-{name}" in text]


def test_one_loop_by_two_models_replays_each_only_its_own_thinking(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    # A failover inside one agent loop: A's call, then B's, both answered together.
    store(client, tenant, [ask("x"), call("a", A), call("b", B), result("a", "b")])
    with db.session() as s:
        rows = s.execute(select(Message.client_id, Message.provider, Message.model)).all()
    identity = {client_id: (provider, model) for client_id, provider, model in rows}
    assert identity["a-call"] == ("anthropic", "claude-sonnet-4-5")
    assert identity["b-call"] == ("anthropic", "claude-opus-4-5")
    assert identity["x-ask"] == (None, None)

    for_a = assembled(client, tenant, "ab", model=A["model"], provider="anthropic")
    assert signed(for_a, "a") == [True, True]
    assert signed(for_a, "b") == [False, False]

    for_b = assembled(client, tenant, "ab", model=B["model"])  # no provider: the model decides
    assert signed(for_b, "b") == [True, True]
    assert signed(for_b, "a") == [False, False]

    elsewhere = assembled(client, tenant, "ab", model=A["model"], provider="bedrock")
    assert signed(elsewhere, "a") == [False, False]  # the same name behind another provider

    untargeted = assembled(client, tenant, "ab")  # no target model: as before, everything
    assert signed(untargeted, "a") + signed(untargeted, "b") == [True] * 4


def test_the_open_tool_loop_of_another_model_loses_its_signed_thinking(
    client: TestClient, tenant: IssuedKey
) -> None:
    done = {"role": "assistant", "id": "a-done", "content": "a read", **A}
    store(client, tenant, [ask("a"), call("a", A), result("a"), done, ask("b"), call("b", B)])
    store(client, tenant, [result("b")])
    assert signed(assembled(client, tenant, "ab", model=B["model"]), "b") == [True, True]
    assert signed(assembled(client, tenant, "ab", model=A["model"]), "b") == [False, False]
    assert signed(assembled(client, tenant, "ab"), "b") == [True, True]


def test_messages_without_identity_keep_their_thinking(
    client: TestClient, tenant: IssuedKey
) -> None:
    store(client, tenant, [ask("a"), call("a", {}), result("a")])
    assert signed(assembled(client, tenant, "a", model=B["model"]), "a") == [True, True]


def test_model_identity_is_for_assistant_messages_and_bounded(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    bad = [
        {"role": "user", "content": "hi", "model": "claude-sonnet-4-5"},
        {"role": "tool", "content": "x", "provider": "anthropic"},
        {"role": "assistant", "content": "x", "model": "m" * 201},
        {"role": "assistant", "content": "x", "provider": ""},
        {"role": "assistant", "content": "x", "model": 7},
    ]
    for message in bad:
        r = post(client, tenant, "k", "messages", {"messages": [message]})
        assert r.status_code in (400, 422), (message, r.text)
        assert "error" in r.json(), r.text
    r = post(client, tenant, "k", "assemble", {"token_budget": 1000, "provider": "x" * 101})
    assert r.status_code in (400, 422), r.text
    with db.session() as s:
        assert s.scalars(select(Message.id)).all() == []


def test_identity_survives_a_fork_and_comes_in_with_a_transcript(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    store(client, tenant, [ask("x"), call("a", A), call("b", B), result("a", "b")])
    body = {"parent_session_key": "k", "mode": "fork"}
    r = client.post("/v1/conversations/k:sub/fork", json=body, headers=auth(tenant))
    assert r.status_code == 200, r.text
    assert r.json()["messages_copied"] == 4
    r = post(client, tenant, "k:sub", "assemble", {"token_budget": 100_000, "model": A["model"]})
    assert signed(json.dumps(r.json()["messages"]), "a") == [True, True]
    assert signed(json.dumps(r.json()["messages"]), "b") == [False, False]

    transcript = (FIXTURES / "pi_v1.jsonl").read_text()
    r = post(client, tenant, "imported", "bootstrap", {"transcript_jsonl": transcript})
    assert r.status_code == 200, r.text
    with db.session() as s:
        identities = s.execute(
            select(Message.role, Message.provider, Message.model).where(
                Message.conversation_id == r.json()["conversation_id"]
            )
        ).all()
    assert {(p, m) for role, p, m in identities if role == "assistant"} == {
        ("anthropic", "claude-sonnet-4-5")
    }
    assert {(p, m) for role, p, m in identities if role != "assistant"} == {(None, None)}

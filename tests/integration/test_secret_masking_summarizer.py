"""The summarizer's model never receives a detected secret, and so no summary holds one.

Messages go in over HTTP (ingest records their spans); a leaf pass then runs
through the real Anthropic SDK against the fake server, whose ``ok`` reply
quotes the start of its source: an unmasked secret would reach the request
body and the stored summary.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select

from lcm.compaction.engine import CompactionEngine
from lcm.db.engine import Database
from lcm.db.models import Message, Summary
from lcm.settings import CompactionSettings
from lcm.summarize.llm import Breakers
from lcm.summarize.summarizer import Summarizer
from lcm.tenants.service import IssuedKey
from tests.conftest import auth
from tests.fakes import FakeAnthropicServer
from tests.fakes.anthropic_script import Behaviour
from tests.fakes.providers import anthropic_provider
from tests.helpers import next_plan

MODEL = "claude-test"
SETTINGS = CompactionSettings(fresh_tail_count=4, leaf_chunk_tokens=4_000, summary_model=MODEL)
GITHUB = "ghp_" + "Qm7z" * 9
AWS_ID = "AKIA" + "R2D2" * 4
PASSWORD = "Corr3ct-Horse-B4ttery"
PEM = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkJ3xq9\nTm9uc2Vuc2U=\n-----END EC PRIVATE KEY-----"
SECRETS = (GITHUB, AWS_ID, PASSWORD, "MHcCAQEEIBkJ3xq9")


def conversation() -> list[dict[str, Any]]:
    first: list[dict[str, Any]] = [
        {"role": "user", "id": "m0", "content": f"🙂 token {GITHUB} then key {AWS_ID} please"},
        {
            "role": "assistant",
            "id": "m1",
            "content": [
                {"type": "text", "text": "Checking the database URL and the key file."},
                {"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": "cat .env"}},
            ],
        },
        {
            "role": "user",
            "id": "m2",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": f"DATABASE_URL=postgres://app:{PASSWORD}@db/app\n{PEM}",
                }
            ],
        },
        {"role": "assistant", "id": "m3", "content": f"Rotate {GITHUB} and the EC key."},
    ]
    rest: list[dict[str, Any]] = [
        {"role": "user" if i % 2 == 0 else "assistant", "id": f"n{i}", "content": f"step {i} done"}
        for i in range(20)
    ]
    return first + rest


def test_a_leaf_pass_sends_placeholders_never_the_secrets(
    db: Database, tenant: IssuedKey, client: TestClient, llm: FakeAnthropicServer
) -> None:
    r = client.post(
        "/v1/conversations/agent%3Amain/messages",
        headers=auth(tenant),
        json={"messages": conversation()},
    )
    assert r.status_code == 200, r.text
    cid = r.json()["conversation_id"]
    with db.read_session() as s:  # stored as sent
        stored = "\n".join(s.scalars(select(Message.content).where(Message.conversation_id == cid)))
    assert all(secret in stored for secret in SECRETS)

    provider = anthropic_provider(llm.base_url, MODEL, breakers=Breakers(5, 30))
    engine = CompactionEngine(db.transaction, Summarizer(provider))
    plan = next_plan(engine, cid, SETTINGS, 1_000)
    assert plan is not None
    assert plan.kind == "leaf"
    assert {e.message.seq for e in plan.entries if e.message is not None} >= {1, 2, 3, 4}
    engine.run_pass(tenant.tenant_id, cid, plan, SETTINGS)

    assert llm.requests  # (an escalation may ask again: every request is checked)
    for request in llm.requests:
        body = json.dumps(request.body, ensure_ascii=False)
        assert [secret for secret in SECRETS if secret in body] == []
    text = llm.requests[0].user_text
    assert "🙂 token [secret:github_token#1] then key [secret:aws_key#2] please" in text
    assert "postgres://app:[secret:password_in_url#3]@db/app" in text
    assert "[secret:private_key#4]" in text
    assert "Rotate [secret:github_token#1] and the EC key." in text  # the same value, the same #
    with db.read_session() as s:
        (summary,) = s.scalars(select(Summary).where(Summary.conversation_id == cid)).all()
    assert "[secret:github_token#1]" in summary.content  # the fake quoted the masked start
    assert [secret for secret in SECRETS if secret in summary.content] == []


def test_a_secret_in_the_models_output_is_masked_before_it_is_stored(
    db: Database, tenant: IssuedKey, client: TestClient, llm: FakeAnthropicServer
) -> None:
    """An old summary written before masking, or an invented key: the output is checked too."""
    r = client.post(
        "/v1/conversations/agent%3Amain/messages",
        headers=auth(tenant),
        json={"messages": conversation()},
    )
    cid = r.json()["conversation_id"]
    quoted = "sk-ant-api03-" + "Lk9_" * 23 + "AA"
    llm.set_default(
        Behaviour.reply(f"The user rotated {quoted} twice.\nExpand for details about: keys")
    )
    provider = anthropic_provider(llm.base_url, MODEL, breakers=Breakers(5, 30))
    engine = CompactionEngine(db.transaction, Summarizer(provider))
    plan = next_plan(engine, cid, SETTINGS, 1_000)
    assert plan is not None
    engine.run_pass(tenant.tenant_id, cid, plan, SETTINGS)
    with db.read_session() as s:
        (summary,) = s.scalars(select(Summary).where(Summary.conversation_id == cid)).all()
    assert quoted not in summary.content
    assert summary.content.startswith("The user rotated [secret:anthropic_key] twice.")

"""Assemble with a ``prompt``: prompt-aware eviction and the recall cue, over HTTP.

A conversation whose relevant fact is old and outside the budget: with
``prompt_aware_eviction`` on and a prompt naming it, the window holds it,
within the budget, the fresh tail intact and a tool call kept with its
result; off, or with a prompt of no searchable word, the window is the one
assembled without a prompt. The recall cue adds a sentence naming an
identifier of the prompt, citing its message, never past the budget and
never for a secret-like name.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from fastapi.testclient import TestClient
from sqlalchemy import select

from lcm.db.engine import Database
from lcm.db.models import ContextItem, Message, Summary
from lcm.tenants.keys import IssuedKey
from tests.conftest import RecordingSender, api_client, auth
from tests.e2e.test_sessions_http import patch
from tests.integration.retrieval_data import compact, ingest

BASE = "/v1/conversations/agent%3Aprompt"
TAIL = 4
FACT = "relay.conf: the kestrel relay listens on port 7443 behind the edge balancer."
PROMPT = "Which port does the kestrel relay listen on?"


def filler(n: int) -> list[dict[str, Any]]:
    """Turns about nothing the prompts ask for (no word of theirs, not even inside one)."""
    return [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "id": f"f{i}",
            "content": f"Lunch note {i}: the cafeteria serves soup on mondays and the garden "
            f"beds need watering before noon, item {i} of the weekly chores list.",
        }
        for i in range(n)
    ]


def relay_tool_pair() -> list[dict[str, Any]]:
    """An old tool call whose result holds the fact (the call itself does not name it)."""
    return [
        {"role": "user", "id": "q0", "content": "Please open the config file for me."},
        {
            "role": "assistant",
            "id": "a0",
            "content": [
                {"type": "text", "text": "Opening it."},
                {
                    "type": "tool_use",
                    "id": "toolu_cfg",
                    "name": "read_file",
                    "input": {"file": "cfg-main"},
                },
            ],
        },
        {
            "role": "user",
            "id": "r0",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_cfg", "content": FACT}],
        },
        {"role": "assistant", "id": "a1", "content": "Done, the file is open."},
    ]


def send(client: TestClient, tenant: IssuedKey, messages: list[dict[str, Any]]) -> None:
    r = client.post(f"{BASE}/messages", json={"messages": messages}, headers=auth(tenant))
    assert r.status_code == 200, r.text


def assemble(client: TestClient, tenant: IssuedKey, budget: int, **extra: Any) -> Any:
    r = client.post(
        f"{BASE}/assemble", json={"token_budget": budget, **extra}, headers=auth(tenant)
    )
    assert r.status_code == 200, r.text
    return r.json()


def text_of(out: Any) -> str:
    return json.dumps(out["messages"])


def tail_intact(out: Any, sent: list[dict[str, Any]]) -> None:
    """The last TAIL messages sent close the window, verbatim and in order."""
    tail = [m["content"] for m in sent[-TAIL:]]
    closing = [m["content"][0]["text"] for m in out["messages"][-TAIL:]]
    assert closing[-1] == tail[-1]
    shown = text_of(out)
    positions = [shown.index(json.dumps(t)[1:-1]) for t in tail]
    assert positions == sorted(positions)
    assert out["fresh_tail_count"] == TAIL
    assert not out["fresh_tail_overflow"]


def test_prompt_aware_eviction_keeps_the_old_fact_the_prompt_asks_for(
    client: TestClient, tenant: IssuedKey
) -> None:
    patch(client, tenant, fresh_tail_count=TAIL, prompt_recall_max_snippets=0)
    sent = relay_tool_pair() + filler(40)
    send(client, tenant, sent)
    budget = 600
    plain = assemble(client, tenant, budget)
    assert "7443" not in text_of(plain), "the fact is old and outside the budget"

    # Off (the default): a prompt changes nothing.
    assert assemble(client, tenant, budget, prompt=PROMPT) == plain

    patch(client, tenant, prompt_aware_eviction=True)
    out = assemble(client, tenant, budget, prompt=PROMPT)
    assert "7443" in text_of(out)
    assert out["estimated_tokens"] <= budget
    tail_intact(out, sent)
    # The call came with its result: paired, not repaired.
    messages = out["messages"]
    call = next(
        i
        for i, m in enumerate(messages)
        if m["role"] == "assistant"
        and any(b.get("id") == "toolu_cfg" for b in m["content"] if isinstance(b, dict))
    )
    result = messages[call + 1]["content"][0]
    assert result["type"] == "tool_result"
    assert result["tool_use_id"] == "toolu_cfg"
    assert FACT in json.dumps(result)
    assert "No result was recorded" not in text_of(out)
    # Room was made for it: some newer filler the plain window had is gone.
    assert any(json.dumps(m) not in text_of(out) for m in plain["messages"])

    # No searchable word in the prompt: newest-first, as without one.
    assert assemble(client, tenant, budget, prompt="What was it, and why?") == plain
    assert assemble(client, tenant, budget, prompt="?! ...") == plain
    # A budget holding everything: nothing to choose, the same window.
    assert assemble(client, tenant, 100_000, prompt=PROMPT) == assemble(client, tenant, 100_000)


def test_prompt_aware_eviction_never_splits_a_tool_pair(
    client: TestClient, tenant: IssuedKey
) -> None:
    """Only the result matches; the unit (call + result) is kept or dropped whole."""
    patch(
        client,
        tenant,
        fresh_tail_count=TAIL,
        prompt_recall_max_snippets=0,
        prompt_aware_eviction=True,
    )
    sent = filler(6) + relay_tool_pair() + filler(40)
    send(client, tenant, sent)
    kept = []
    tail_only = assemble(client, tenant, 1)["estimated_tokens"]
    for budget in range(tail_only + 5, 1000, 15):
        out = assemble(client, tenant, budget, prompt=PROMPT)
        shown = text_of(out)
        assert out["estimated_tokens"] <= budget
        assert ("toolu_cfg" in shown) == ("7443" in shown)
        assert "No result was recorded" not in shown
        assert shown.count("toolu_cfg") in (0, 2), "a call and its result, or neither"
        kept.append("7443" in shown)
    assert not kept[0], "too small for the pair at first"
    assert kept[-1], "then kept"


def recall_history() -> list[dict[str, Any]]:
    return [
        {"role": "user", "id": "o0", "content": "Where did the staging relay end up?"},
        {
            "role": "assistant",
            "id": "o1",
            "content": "Noted for later. We set ORBIT_RELAY_PORT to 7443 in the staging "
            "config. The rest stays as it was.",
        },
        {"role": "user", "id": "o2", "content": "And the cloud credentials?"},
        {
            "role": "assistant",
            "id": "o3",
            "content": "AWS_SECRET_ACCESS_KEY lives in the vault under ops/billing.",
        },
    ]


def test_recall_cue_adds_the_sentence_naming_the_identifier(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    patch(client, tenant, fresh_tail_count=TAIL)
    sent = recall_history() + filler(30)
    send(client, tenant, sent)
    with db.read_session() as s:
        orbit_id = s.scalar(select(Message.id).where(Message.content.contains("ORBIT_RELAY")))
    budget = 700
    plain = assemble(client, tenant, budget)
    assert "ORBIT_RELAY_PORT" not in text_of(plain)
    assert plain["recalled"] == []

    prompt = "What did we set ORBIT_RELAY_PORT to, and where is AWS_SECRET_ACCESS_KEY kept?"
    out = assemble(client, tenant, budget, prompt=prompt)
    assert out["estimated_tokens"] <= budget
    tail_intact(out, sent)
    [recalled] = out["recalled"]
    assert recalled["identifier"] == "ORBIT_RELAY_PORT"
    assert recalled["message_id"] == orbit_id
    assert recalled["ref"] == f"msg_{orbit_id}"
    assert recalled["role"] == "assistant"
    assert recalled["text"] == "We set ORBIT_RELAY_PORT to 7443 in the staging config."
    block = json.dumps(out["messages"][recalled["message_index"]])
    assert "<recalled_history>" in block
    assert f'id=\\"msg_{orbit_id}\\"' in block
    assert "7443" in block
    # The secret-like name is never looked up: nothing of its message shows.
    assert "AWS_SECRET_ACCESS_KEY" not in text_of(out)
    assert "vault" not in text_of(out)
    # Only what was added: the same window with the block before the fresh tail.
    assert out["estimated_tokens"] > plain["estimated_tokens"]

    # Named in the window already: nothing recalled.
    shown = assemble(client, tenant, budget, prompt="What is item 29 of the chores list?")
    assert shown["recalled"] == []
    assert shown == plain

    # A budget the block does not fit: not added, never over the budget.
    tail_only = assemble(client, tenant, 1)["estimated_tokens"]
    tight = assemble(client, tenant, tail_only + 10, prompt=prompt)
    assert tight["recalled"] == []
    assert tight["estimated_tokens"] <= tail_only + 10
    assert "ORBIT_RELAY_PORT" not in text_of(tight)

    # Validated like every tenant setting.
    for bad in ({"prompt_recall_max_snippets": 17}, {"prompt_aware_eviction": "maybe"}):
        r = client.patch("/v1/tenant/settings", headers=auth(tenant), json=bad)
        assert r.status_code == 400, r.text
    # Off: the window assembled without a prompt.
    patch(client, tenant, prompt_recall_max_snippets=0)
    assert assemble(client, tenant, budget, prompt=prompt) == plain


def test_secret_like_identifiers_are_never_looked_up(client: TestClient, tenant: IssuedKey) -> None:
    patch(client, tenant, fresh_tail_count=TAIL)
    history = [
        {"role": "assistant", "id": "s0", "content": "GITHUB_TOKEN is in the runner settings."},
        {"role": "assistant", "id": "s1", "content": "DB_PASSWORD rotates every month."},
        {"role": "assistant", "id": "s2", "content": "BUILD_RUNNER_POOL has eight hosts."},
        {"role": "assistant", "id": "s3", "content": "See ~/.ssh/id_rsa.pub on the bastion."},
    ]
    send(client, tenant, history + filler(30))
    prompt = "Where are GITHUB_TOKEN, DB_PASSWORD, ~/.ssh/id_rsa.pub and BUILD_RUNNER_POOL set?"
    out = assemble(client, tenant, 600, prompt=prompt)
    assert [r["identifier"] for r in out["recalled"]] == ["BUILD_RUNNER_POOL"]
    shown = text_of(out)
    assert "eight hosts" in shown
    for secret in ("GITHUB_TOKEN", "DB_PASSWORD", "rotates", "id_rsa", "bastion"):
        assert secret not in shown


def test_a_search_past_its_deadline_is_given_up_not_the_assembly(
    db: Database, tenant: IssuedKey, sender: RecordingSender
) -> None:
    """A 1 ms statement timeout: the ranking and the lookups give up, assembly answers."""
    settings = db.settings.model_copy(update={"statement_timeout_ms": 1})
    for client in api_client(settings, db, sender):
        patch(client, tenant, fresh_tail_count=TAIL, prompt_aware_eviction=True)
        sent = recall_history() + relay_tool_pair() + filler(200)
        send(client, tenant, sent)
        plain = assemble(client, tenant, 600)
        prompt = f"{PROMPT} And ORBIT_RELAY_PORT?"
        for _ in range(3):
            out = assemble(client, tenant, 600, prompt=prompt)
            assert out["estimated_tokens"] <= 600
            tail_intact(out, sent)
            assert out["fresh_tail_count"] == plain["fresh_tail_count"]


def test_a_summary_holding_the_fact_is_kept_on_both_indexes(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    """Compacted history, indexed for search (SQLite's FTS5 too, not its backlog)."""
    key = "agent:compacted"
    texts = [FACT] + [m["content"] for m in filler(60)]
    cid = ingest(db, tenant.tenant_id, key, texts, index=True)
    compact(db, tenant.tenant_id, cid)
    with db.read_session() as s:
        holders = s.scalars(
            select(Summary.id)
            .join(ContextItem, ContextItem.summary_id == Summary.id)
            .where(ContextItem.conversation_id == cid, Summary.content.contains("7443"))
        ).all()
    assert holders, "the offline summary keeps the fact"
    patch(client, tenant, prompt_aware_eviction=True, prompt_recall_max_snippets=0)
    path = f"/v1/conversations/{quote(key, safe='')}/assemble"

    def assembled(**body: Any) -> Any:
        r = client.post(path, json={"token_budget": 500, **body}, headers=auth(tenant))
        assert r.status_code == 200, r.text
        return r.json()

    plain = assembled()
    assert "7443" not in text_of(plain)
    out = assembled(prompt=PROMPT)
    assert any(h in text_of(out) for h in holders)
    assert "7443" in text_of(out)
    assert out["estimated_tokens"] <= 500
    assert out["messages"][-1] == plain["messages"][-1]

"""Sessions over HTTP: ignored and stateless session keys, model_overrides, /new and /reset."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from lcm.db.engine import Database
from lcm.db.models import Conversation, Message, Summary
from lcm.tenants.service import IssuedKey
from tests.conftest import auth


def patch(client: TestClient, tenant: IssuedKey, **values: Any) -> None:
    r = client.patch("/v1/tenant/settings", headers=auth(tenant), json=values)
    assert r.status_code == 200, r.text


def post(client: TestClient, tenant: IssuedKey, key: str, path: str, body: Any) -> Any:
    return client.post(f"/v1/conversations/{key}/{path}", headers=auth(tenant), json=body)


def messages(n: int, prefix: str = "m") -> list[dict[str, Any]]:
    return [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "id": f"{prefix}{i}",
            "content": f"message {i} about the deploy of service {i % 7} " * 8,
        }
        for i in range(n)
    ]


def count(db: Database, model: type[Message] | type[Conversation]) -> int:
    with db.session() as s:
        return int(s.scalar(select(func.count()).select_from(model)) or 0)


def test_ignored_session_keys_store_nothing(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    patch(client, tenant, ignore_session_patterns=["agent:*:cron:**"])
    body = {"messages": messages(2)}
    turn = {"token_budget": 1000}
    for path, extra in (
        ("messages", {}),
        ("turns", turn),
        ("commits", {**turn, "advancement_key": "a1"}),
    ):
        r = post(client, tenant, "agent:main:cron:nightly:7", path, {**body, **extra})
        assert r.status_code == 200, r.text
        out = r.json()
        assert out["ignored"] is True
        assert out["stateless"] is False
        assert out["ingested"] == 0
        assert out["conversation_id"] is None
    boot = post(client, tenant, "agent:main:cron:x", "bootstrap", {"transcript_jsonl": ""})
    assert boot.json()["ignored"] is True
    compact = post(client, tenant, "agent:main:cron:x", "compact", {})
    assert compact.json()["status"] == "ignored"
    assert count(db, Message) == 0
    assert count(db, Conversation) == 0
    # "*" stays within one segment: an extra segment before "cron" is not ignored.
    kept = post(client, tenant, "agent:main:sub:cron:x", "messages", body)
    assert kept.json()["ingested"] == 2
    assert kept.json()["ignored"] is False
    assert count(db, Message) == 2


def test_stateless_sessions_read_but_do_not_write(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    key = "agent:ops:subagent:42"
    first = post(client, tenant, key, "messages", {"messages": messages(4)})
    assert first.json()["ingested"] == 4
    patch(client, tenant, stateless_session_patterns=["agent:*:subagent:**"])
    r = post(client, tenant, key, "turns", {"messages": messages(2, "n"), "token_budget": 1000})
    assert r.status_code == 200
    assert r.json()["stateless"] is True
    assert r.json()["ingested"] == 0
    assert count(db, Message) == 4
    assembled = post(client, tenant, key, "assemble", {"token_budget": 100_000})
    assert assembled.status_code == 200
    assert len(assembled.json()["messages"]) == 4
    assert post(client, tenant, key, "compact", {}).json()["status"] == "stateless"
    status = client.get(f"/v1/conversations/{key}/status", headers=auth(tenant))
    assert status.status_code == 200
    assert status.json()["messages"] == 4


def test_session_settings_are_validated(client: TestClient, tenant: IssuedKey) -> None:
    for bad in (
        {"ignore_session_patterns": [""]},
        {"model_overrides": [{"model": "x", "context_threshold": 2}]},
        {"model_overrides": [{"model": "x", "surprise": 1}]},
    ):
        r = client.patch("/v1/tenant/settings", headers=auth(tenant), json=bad)
        assert r.status_code == 400, bad
        assert r.json()["error"]["code"] == "invalid_input"
    rule = {"model": "gpt-*", "fresh_tail_count": 8}
    patch(client, tenant, stateless_session_patterns=["a:**"], model_overrides=[rule])
    got = client.get("/v1/tenant/settings", headers=auth(tenant)).json()
    assert got["overrides"]["stateless_session_patterns"] == ["a:**"]
    assert got["effective"]["model_overrides"][0]["fresh_tail_count"] == 8


def test_model_overrides_set_the_threshold_and_fresh_tail(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    patch(
        client,
        tenant,
        model_overrides=[
            {"context_window_min": 900_000, "fresh_tail_count": 2},
            {"model": "claude-*", "context_threshold": 0.1, "leaf_chunk_tokens": 1000},
        ],
    )
    plain = post(client, tenant, "a", "turns", {"messages": messages(6), "token_budget": 10_000})
    assert plain.json()["threshold_tokens"] == 7_500
    named = post(
        client,
        tenant,
        "b",
        "turns",
        {"messages": messages(6), "token_budget": 10_000, "model": "claude-sonnet-4-5"},
    )
    assert named.json()["threshold_tokens"] == 1_000
    # A later turn that names no model keeps the conversation's rule (and so do its sweeps).
    later = post(
        client, tenant, "b", "turns", {"messages": messages(2, "x"), "token_budget": 10_000}
    )
    assert later.json()["threshold_tokens"] == 1_000
    with db.session() as s:
        stored = s.scalar(select(Conversation.model_id).where(Conversation.session_key == "b"))
    assert stored == "claude-sonnet-4-5"

    def tail(**extra: Any) -> int:
        r = post(client, tenant, "a", "assemble", {"token_budget": 100_000, **extra})
        assert r.status_code == 200, r.text
        return int(r.json()["fresh_tail_count"])

    assert tail() == 6
    assert tail(context_window=1_000_000) == 2
    assert tail(context_window=200_000) == 6


def compacted(client: TestClient, tenant: IssuedKey, key: str) -> int:
    """A conversation with summaries in its context (inline sweep); returns its id."""
    patch(
        client,
        tenant,
        compaction_mode="inline",
        fresh_tail_count=4,
        leaf_min_fanout=4,
        leaf_chunk_tokens=400,
    )
    out = post(client, tenant, key, "turns", {"messages": messages(40), "token_budget": 600})
    assert out.json()["compaction"] == "ran", out.text
    return int(out.json()["conversation_id"])


def test_new_keeps_the_conversation_and_prunes_its_context(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    conversation_id = compacted(client, tenant, "k")
    before = post(client, tenant, "k", "assemble", {"token_budget": 100_000}).json()
    assert before["summary_count"] >= 1
    assert before["fresh_tail_count"] >= 4
    r = post(client, tenant, "k", "session", {"mode": "new", "retain_depth": 0})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["conversation_id"] == conversation_id
    assert out["archived_conversation_id"] is None
    assert out["context_items_removed"] >= 4
    after = post(client, tenant, "k", "assemble", {"token_budget": 100_000}).json()
    assert after["conversation_id"] == conversation_id
    assert after["fresh_tail_count"] == 0
    assert after["summary_count"] == before["summary_count"]
    assert count(db, Message) == 40  # pruned from the context, never deleted
    # retain_depth -1 (the default setting) prunes nothing.
    again = post(client, tenant, "k", "session", {"mode": "new"})
    assert again.json()["context_items_removed"] == 0


def test_reset_archives_and_starts_fresh(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    old = compacted(client, tenant, "k")
    r = post(client, tenant, "k", "session", {"mode": "reset", "session_id": "s2"})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["archived_conversation_id"] == old
    assert out["conversation_id"] != old
    assembled = post(client, tenant, "k", "assemble", {"token_budget": 100_000}).json()
    assert assembled["conversation_id"] == out["conversation_id"]
    assert assembled["messages"] == []
    nxt = post(client, tenant, "k", "messages", {"session_id": "s2", "messages": messages(1, "z")})
    assert nxt.json()["conversation_id"] == out["conversation_id"]
    with db.session() as s:
        archived = s.scalar(select(Conversation.archived_at).where(Conversation.id == old))
    assert archived is not None
    taken = post(client, tenant, "k", "session", {"mode": "reset", "session_id": "s2"})
    assert taken.status_code == 409
    assert taken.json()["error"]["code"] == "session_id_taken"


def test_model_overrides_reach_the_sweep(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    rule = {"model": "big-*", "leaf_chunk_tokens": 4000}
    patch(client, tenant, model_overrides=[rule])
    plain = compacted(client, tenant, "plain")
    body = {"messages": messages(40), "token_budget": 600, "model": "big-model"}
    named = post(client, tenant, "named", "turns", body)
    assert named.json()["compaction"] == "ran", named.text

    def leaves(conversation_id: int) -> int:
        with db.session() as s:
            return int(
                s.scalar(
                    select(func.count())
                    .select_from(Summary)
                    .where(Summary.conversation_id == conversation_id, Summary.kind == "leaf")
                )
                or 0
            )

    # 36 messages outside the tail, ~90 tokens each: 400-token chunks take 4, 4000 take all.
    assert leaves(plain) >= 8
    assert leaves(named.json()["conversation_id"]) <= 2

"""Agent-host lifecycle over HTTP: exactly-once turn commits, subagent forks, recall prompt."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from lcm.db.engine import Database
from lcm.db.models import ContextItem, Message, Summary, TurnCommit
from lcm.tenants.service import IssuedKey
from tests.conftest import RecordingSender, auth
from tests.integration.retrieval_data import compact, ingest

BASE = "/v1/conversations"


def turn(i: int) -> list[dict[str, Any]]:
    # No client ids: exactly-once must come from the advancement key alone.
    return [
        {"role": "user", "content": f"question {i} about the release train"},
        {"role": "assistant", "content": [{"type": "text", "text": f"answer {i}"}]},
    ]


def commit(client: TestClient, tenant: IssuedKey, key: str, i: int, budget: int = 100_000) -> Any:
    response = client.post(
        f"{BASE}/{key}/commits",
        json={"advancement_key": key_for(i), "messages": turn(i), "token_budget": budget},
        headers=auth(tenant),
    )
    assert response.status_code == 200, response.text
    return response.json()


def key_for(i: int) -> str:
    return f"turn-{i}"


def count(db: Database, model: Any) -> int:
    with db.session() as s:
        return int(s.scalar(select(func.count()).select_from(model)) or 0)


def test_commit_is_exactly_once_per_advancement_key(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    first = commit(client, tenant, "oc", 1)
    assert first["status"] == "committed"
    assert first["ingested"] == 2
    retry = commit(client, tenant, "oc", 1)
    assert retry["status"] == "duplicate"
    assert retry["ingested"] == 0
    assert retry["conversation_id"] == first["conversation_id"]
    assert commit(client, tenant, "oc", 2)["status"] == "committed"
    assert count(db, Message) == 4
    assert count(db, TurnCommit) == 2


def test_same_key_in_another_conversation_is_its_own_turn(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    assert commit(client, tenant, "a", 1)["status"] == "committed"
    assert commit(client, tenant, "b", 1)["status"] == "committed"
    assert count(db, Message) == 4


def test_commit_over_the_threshold_schedules_compaction(
    client: TestClient, tenant: IssuedKey, sender: RecordingSender
) -> None:
    out = commit(client, tenant, "small", 1, budget=10)
    assert out["compaction"] == "scheduled"
    assert sender.woken == [out["conversation_id"]]
    assert commit(client, tenant, "small", 1, budget=10)["compaction"] == "none"
    assert len(sender.woken) == 1


def test_commit_refusals_are_4xx(client: TestClient, tenant: IssuedKey, db: Database) -> None:
    bad = client.post(
        f"{BASE}/x/commits",
        json={"advancement_key": "", "messages": turn(1), "token_budget": 10},
        headers=auth(tenant),
    )
    assert bad.status_code == 400
    assert bad.json()["error"]["code"] == "invalid_input"
    odd_role = client.post(
        f"{BASE}/x/commits",
        json={
            "advancement_key": "k",
            "messages": [{"role": "robot", "content": "x"}],
            "token_budget": 10,
        },
        headers=auth(tenant),
    )
    assert odd_role.status_code == 400
    assert count(db, TurnCommit) == 0
    assert count(db, Message) == 0


def parent_with_summaries(db: Database, tenant: IssuedKey) -> int:
    sent = [f"user line {i} about the fox" if i % 2 == 0 else f"reply {i}" for i in range(40)]
    cid = ingest(db, tenant.tenant_id, "agent:main", sent)
    compact(db, tenant.tenant_id, cid)
    return cid


def context_of(db: Database, conversation_id: int) -> list[tuple[str | None, int | None]]:
    with db.session() as s:
        return [
            (row.summary_id, row.message_id)
            for row in s.execute(
                select(ContextItem.summary_id, ContextItem.message_id)
                .where(ContextItem.conversation_id == conversation_id)
                .order_by(ContextItem.ordinal)
            )
        ]


def test_fork_shares_summaries_and_copies_the_tail(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    parent = parent_with_summaries(db, tenant)
    parent_context = context_of(db, parent)
    summaries_before = count(db, Summary)
    body = {"parent_session_key": "agent:main", "mode": "fork"}
    out = client.post(f"{BASE}/agent:main:sub:1/fork", json=body, headers=auth(tenant))
    assert out.status_code == 200, out.text
    forked = out.json()
    shared = [sid for sid, _ in parent_context if sid is not None]
    assert forked["created"]
    assert forked["summaries_shared"] == len(shared) > 0
    assert forked["messages_copied"] == len(parent_context) - len(shared)
    child_context = context_of(db, forked["conversation_id"])
    # Same summary rows, same order; no summary was copied.
    assert [sid for sid, _ in child_context] == [sid for sid, _ in parent_context]
    assert count(db, Summary) == summaries_before
    assert context_of(db, parent) == parent_context
    again = client.post(f"{BASE}/agent:main:sub:1/fork", json=body, headers=auth(tenant))
    assert again.json()["created"] is False
    assert again.json()["conversation_id"] == forked["conversation_id"]
    assembled = client.post(
        f"{BASE}/agent:main:sub:1/assemble",
        json={"token_budget": 50_000, "system_prompt": True, "available_tools": ["lcm_grep"]},
        headers=auth(tenant),
    ).json()
    assert any("<summary" in str(m["content"]) for m in assembled["messages"])
    addition = assembled["system_prompt_addition"]
    assert "lcm_grep" in addition
    assert "lcm_expand_query" not in addition


def test_isolated_child_starts_empty_and_end_archives_it(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    parent_with_summaries(db, tenant)
    body = {"parent_session_key": "agent:main", "mode": "isolated"}
    out = client.post(f"{BASE}/child/fork", json=body, headers=auth(tenant)).json()
    assert out["summaries_shared"] == out["messages_copied"] == 0
    assert context_of(db, out["conversation_id"]) == []
    ended = client.post(
        f"{BASE}/child/fork/end", json={"reason": "completed"}, headers=auth(tenant)
    )
    assert ended.json() == {
        "conversation_id": out["conversation_id"],
        "status": "ended",
        "end_reason": "completed",
    }
    status = client.get(f"{BASE}/child/status", headers=auth(tenant)).json()
    assert status["archived"] is True


def test_rollback_undoes_the_preparation(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    parent = parent_with_summaries(db, tenant)
    parent_context = context_of(db, parent)
    body = {"parent_session_key": "agent:main"}
    out = client.post(f"{BASE}/child/fork", json=body, headers=auth(tenant)).json()
    rolled = client.post(f"{BASE}/child/fork/rollback", headers=auth(tenant))
    assert rolled.json()["status"] == "rolled_back"
    assert context_of(db, out["conversation_id"]) == []
    assert context_of(db, parent) == parent_context
    # A new spawn of the same child key prepares a fresh conversation.
    fresh = client.post(f"{BASE}/child/fork", json=body, headers=auth(tenant)).json()
    assert fresh["created"]
    assert fresh["conversation_id"] != out["conversation_id"]


def test_fork_refusals(client: TestClient, tenant: IssuedKey) -> None:
    missing = client.post(
        f"{BASE}/child/fork", json={"parent_session_key": "nope"}, headers=auth(tenant)
    )
    assert missing.status_code == 404
    assert client.post(f"{BASE}/nobody/fork/end", json={}, headers=auth(tenant)).status_code == 404


def test_assemble_without_summaries_has_no_recall_prompt(
    client: TestClient, tenant: IssuedKey
) -> None:
    commit(client, tenant, "plain", 1)
    out = client.post(
        f"{BASE}/plain/assemble",
        json={"token_budget": 1000, "system_prompt": True},
        headers=auth(tenant),
    ).json()
    assert out["system_prompt_addition"] is None
    assert len(out["messages"]) == 2


def test_recall_prompt_through_a_hosts_tool_caller(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    parent_with_summaries(db, tenant)

    def addition(**extra: Any) -> str:
        body = {"token_budget": 50_000, "system_prompt": True, **extra}
        r = client.post(f"{BASE}/agent:main/assemble", json=body, headers=auth(tenant))
        assert r.status_code == 200, r.text
        return str(r.json()["system_prompt_addition"])

    direct = addition()
    deferred = addition(tool_caller="tool_call")
    assert "deferred" not in direct
    assert deferred.startswith(direct + "\n")  # the same hints, then how to reach them
    assert deferred.endswith('\ntool_call {"id": "lcm_grep", "args": {"pattern": "..."}}')
    too_long = {"token_budget": 50_000, "system_prompt": True, "tool_caller": "x" * 201}
    r = client.post(f"{BASE}/agent:main/assemble", json=too_long, headers=auth(tenant))
    assert r.status_code == 400

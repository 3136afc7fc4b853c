"""Degraded summaries, the doctor and its repair, and the LLM spend guard, over HTTP.

The API runs with an LLM configured (the real Anthropic SDK against the fake
Messages API server) and the tenant in inline compaction mode, so a turn runs
the production chain (debt row, lease, one pass per job) in the request.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select

from lcm.assembly import summary_context_tokens
from lcm.context_store.repository import summary_view
from lcm.db.engine import Database
from lcm.db.models import (
    CompactionDebt,
    ContextItem,
    LlmUsage,
    Summary,
    SummaryMessage,
    SummaryParent,
)
from lcm.tenants.service import IssuedKey
from tests.conftest import RecordingSender, auth
from tests.fakes import FakeAnthropicServer
from tests.fakes.anthropic_script import Behaviour
from tests.integration.test_compaction_engine import assert_lossless
from tests.servers import run_lcm

MODEL = "claude-test"
KEY = "agent:main:doctor"
# Small chunks and fanouts: a few dozen messages make leaves and condensed summaries.
TENANT_SETTINGS: dict[str, Any] = {
    "compaction_mode": "inline",
    "summary_model": MODEL,
    "fresh_tail_count": 6,
    "leaf_min_fanout": 4,
    "leaf_chunk_tokens": 600,
    "condensed_min_fanout": 3,
    "summary_prefix_target_tokens": 100,
}


def configure(client: TestClient, tenant: IssuedKey, **extra: Any) -> None:
    r = client.patch("/v1/tenant/settings", json={**TENANT_SETTINGS, **extra}, headers=auth(tenant))
    assert r.status_code == 200, r.text


def words(i: int) -> str:
    topics = ["deploy", "database", "migration", "billing", "search", "backup"]
    return f"step {i}: we changed the {topics[i % 6]} settings and checked the logs " * 4


def turn(client: TestClient, tenant: IssuedKey, start: int, n: int, **extra: Any) -> Any:
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": words(i)}
        for i in range(start, start + n)
    ]
    r = client.post(
        f"/v1/conversations/{KEY}/turns",
        json={"messages": messages, "token_budget": 2_000, **extra},
        headers=auth(tenant),
    )
    assert r.status_code == 200, r.text
    return r.json()


def summaries(db: Database) -> dict[str, Summary]:
    with db.session() as s:
        return {row.id: row for row in s.scalars(select(Summary))}


def links(db: Database) -> tuple[set[tuple[str, int]], set[tuple[str, str]]]:
    with db.session() as s:
        messages = {(r.summary_id, r.message_id) for r in s.scalars(select(SummaryMessage))}
        parents = {(r.summary_id, r.parent_id) for r in s.scalars(select(SummaryParent))}
    return messages, parents


def doctor(client: TestClient, tenant: IssuedKey) -> dict[str, Any]:
    r = client.get("/v1/tenant/doctor", headers=auth(tenant))
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def listed(report: dict[str, Any], problem: str) -> set[str]:
    return {sid for c in report["conversations"] for sid in c[problem]}


def test_outage_degrades_doctor_lists_them_and_apply_repairs_in_place(
    db: Database, tenant: IssuedKey, llm: FakeAnthropicServer, llm_client: TestClient
) -> None:
    configure(llm_client, tenant)
    first = turn(llm_client, tenant, 0, 40)
    assert first["compaction"] == "ran"
    healthy = set(summaries(db))
    assert healthy
    assert all(s.degraded is None for s in summaries(db).values())

    llm.set_default("500")  # the outage: every summary call fails
    assert turn(llm_client, tenant, 40, 40)["compaction"] == "ran"
    made = summaries(db)
    degraded = {sid for sid, s in made.items() if s.degraded is not None}
    assert degraded
    assert degraded.isdisjoint(healthy)
    assert {made[sid].degraded for sid in degraded} == {"llm_error"}
    assert all(made[sid].escalation == "fallback" for sid in degraded)
    cid = made[next(iter(degraded))].conversation_id
    assert_lossless(db, cid)

    report = doctor(llm_client, tenant)
    assert listed(report, "degraded") == degraded  # exactly those
    assert listed(report, "truncated") == degraded
    assert listed(report, "broken") == set()
    assert report["degraded"] == len(degraded)
    # The CLI reads the same.
    cli = run_lcm("doctor", "--json", env={"LCM_DATABASE_URL": db.settings.database_url})
    assert cli.returncode == 0, cli.stderr
    (acme,) = json.loads(cli.stdout)
    assert {s for c in acme["conversations"] for s in c["degraded"]} == degraded

    links_before = links(db)
    llm.set_default(Behaviour.reply("Repaired by the LLM: the zanzibar rollout.\n"))
    r = llm_client.post("/v1/tenant/doctor/apply", json={}, headers=auth(tenant))
    assert r.status_code == 200, r.text
    assert r.json() == {"status": "ran", "conversations": [cid], "repaired": []}

    after = summaries(db)
    assert set(made) <= set(after)  # same ids: none removed, none replaced
    messages_after, parents_after = links(db)
    # Sources and the references of the summaries above them are unchanged.
    assert links_before[0] <= messages_after
    assert links_before[1] <= parents_after
    # The repair chain then goes on as a sweep: what it adds, the LLM wrote.
    assert all(after[sid].degraded is None for sid in set(after) - set(made))
    for sid in degraded:
        assert after[sid].degraded is None
        assert after[sid].model == MODEL
        assert after[sid].escalation == "normal"
        assert "zanzibar" in after[sid].content
    for sid in healthy:
        assert after[sid].content == made[sid].content  # only the degraded were touched
    assert_context_tokens_match(db, cid)
    assert_lossless(db, cid)
    assert listed(doctor(llm_client, tenant), "degraded") == set()
    found = llm_client.post(
        "/v1/grep",
        json={"pattern": "zanzibar", "mode": "full_text", "scope": "summaries", "session_key": KEY},
        headers=auth(tenant),
    )
    assert found.status_code == 200, found.text
    hits = {m["id"] for m in found.json()["matches"]}
    assert degraded <= hits  # the search rows follow the new content
    assert hits - degraded == set(after) - set(made)  # and only the LLM's summaries match


def assert_context_tokens_match(db: Database, conversation_id: int) -> None:
    with db.session() as s:
        items = s.scalars(
            select(ContextItem).where(
                ContextItem.conversation_id == conversation_id, ContextItem.summary_id.is_not(None)
            )
        ).all()
        for item in items:
            summary = s.get(Summary, item.summary_id)
            assert summary is not None
            parents = s.scalars(
                select(SummaryParent.parent_id)
                .where(SummaryParent.summary_id == summary.id)
                .order_by(SummaryParent.ordinal)
            ).all()
            assert item.token_count == summary_context_tokens(summary_view(summary, parents))


def test_apply_while_the_llm_is_still_down_keeps_the_summaries_and_retries(
    db: Database, tenant: IssuedKey, llm: FakeAnthropicServer, llm_client: TestClient
) -> None:
    configure(llm_client, tenant)
    llm.set_default("500")
    turn(llm_client, tenant, 0, 40)
    made = summaries(db)
    assert made
    assert all(s.degraded == "llm_error" for s in made.values())
    r = llm_client.post("/v1/tenant/doctor/apply", json={}, headers=auth(tenant))
    assert r.status_code == 200
    assert r.json()["status"] == "scheduled"
    assert {sid: s.content for sid, s in summaries(db).items()} == {
        sid: s.content for sid, s in made.items()
    }
    with db.session() as s:
        debt = s.scalar(select(CompactionDebt))
        assert debt is not None
        assert (debt.status, debt.reason) == ("pending", "repair")  # retried with backoff
        assert debt.last_error is not None
        assert "llm_error" in debt.last_error


def test_deferred_apply_schedules_a_leased_job(
    db: Database,
    tenant: IssuedKey,
    llm: FakeAnthropicServer,
    llm_client: TestClient,
    sender: RecordingSender,
) -> None:
    configure(llm_client, tenant)
    llm.set_default("500")
    turn(llm_client, tenant, 0, 40)
    configure(llm_client, tenant, compaction_mode="deferred")
    sender.jobs.clear()
    r = llm_client.post("/v1/tenant/doctor/apply", json={}, headers=auth(tenant))
    assert r.status_code == 200
    assert r.json()["status"] == "scheduled"
    (cid,) = r.json()["conversations"]
    assert sender.woken == [cid]  # the wake-up left with the commit
    with db.session() as s:
        debt = s.get(CompactionDebt, cid)
        assert debt is not None
        assert (debt.status, debt.reason) == ("pending", "repair")


def test_spent_budget_summarizes_offline_and_refuses_expand_query(
    db: Database, tenant: IssuedKey, llm: FakeAnthropicServer, llm_client: TestClient
) -> None:
    configure(llm_client, tenant, llm_daily_token_budget=1)
    turn(llm_client, tenant, 0, 40)
    made = sorted(summaries(db).values(), key=lambda s: (s.created_at, s.id))
    # The first summary spends the budget; every later one is extractive, marked "budget".
    assert made[0].model == MODEL
    assert made[0].degraded is None
    assert len(made) > 1
    assert all(s.degraded == "budget" and s.model == "extractive" for s in made[1:])
    with db.session() as s:
        models = {u.model for u in s.scalars(select(LlmUsage))}
    assert MODEL in models
    calls = len(llm.requests)
    r = llm_client.post(
        "/v1/expand-query",
        json={"prompt": "what changed?", "query": "deploy", "session_key": KEY},
        headers=auth(tenant),
    )
    assert r.status_code == 429, r.text
    assert r.json()["error"]["code"] == "llm_budget_exhausted"
    assert int(r.headers["retry-after"]) > 0
    assert len(llm.requests) == calls  # no LLM call was made
    metrics = llm_client.get("/metrics").text
    assert (
        f'lcm_llm_budget_exhausted_total{{purpose="expand_query",tenant="{tenant.tenant_id}"}}'
        in metrics
    )
    report = doctor(llm_client, tenant)
    assert listed(report, "degraded") == {s.id for s in made[1:]}


def test_cli_apply_inline_repairs_with_the_llm(
    db: Database, tenant: IssuedKey, llm: FakeAnthropicServer, llm_client: TestClient
) -> None:
    configure(llm_client, tenant)
    llm.set_default("500")
    turn(llm_client, tenant, 0, 40)
    degraded = {sid for sid, s in summaries(db).items() if s.degraded is not None}
    assert degraded
    llm.set_default("ok")
    env = {
        "LCM_DATABASE_URL": db.settings.database_url,
        "ANTHROPIC_API_KEY": "sk-test",
        "LCM_ANTHROPIC_BASE_URL": llm.base_url,
        "LCM_LLM_MAX_RETRIES": "0",
    }
    done = run_lcm("doctor", "--tenant", "acme", "--apply", "--inline", "--json", env=env)
    assert done.returncode == 0, done.stderr
    listing, repaired = done.stdout.strip().splitlines()
    assert {s for c in json.loads(listing)[0]["conversations"] for s in c["degraded"]} == degraded
    assert set(json.loads(repaired)["repaired"].values()) == {"done"}
    after = summaries(db)
    assert all(after[sid].degraded is None and after[sid].model == MODEL for sid in degraded)
    assert_lossless(db, after[next(iter(degraded))].conversation_id)

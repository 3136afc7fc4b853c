"""expand-query: grants (scope, cap, expiry), the SDK tool loop, the offline answer, a worker."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from pydantic import SecretStr
from sqlalchemy import func, select

from lcm.db.engine import Database
from lcm.db.models import ExpansionGrant, LlmUsage, Summary, utcnow
from lcm.errors import NotFound
from lcm.retrieval.agent_tools import EXHAUSTED, TOOLS, GrantedTools, GrantEnded
from lcm.retrieval.answers import ExpandQueryRequest
from lcm.retrieval.expansion import (
    execute_expand_query,
    grep_limits,
    start_expand_query,
    take_answer,
)
from lcm.retrieval.grants import issue_grant, sweep_grants
from lcm.retrieval.offline_answer import OFFLINE_MARK
from lcm.retrieval.scope import ScopeSelector
from lcm.settings import Settings
from lcm.summarize.llm import LlmClients
from lcm.tenants.service import IssuedKey
from tests.conftest import new_tenant, settings_for
from tests.fakes import Behaviour, FakeAnthropicServer
from tests.integration.retrieval_data import compact, ingest
from tests.sql_plans import recording, sequential_scans

HISTORY = [
    f"turn {i}: we tuned the redis maxmemory policy to allkeys-lru, attempt {i}" for i in range(30)
]


@pytest.fixture
def family(db: Database, tenant: IssuedKey) -> int:
    cid = ingest(db, tenant.tenant_id, "agent:main", HISTORY)
    compact(db, tenant.tenant_id, cid)
    ingest(db, tenant.tenant_id, "agent:elsewhere", ["redis secret from another family"])
    return cid


def grant(db: Database, tenant_id: str, ids: list[int], cap: int = 10_000, ttl: float = 60) -> str:
    with db.transaction() as s:
        return issue_grant(s, tenant_id, ids, cap, ttl, utcnow()).id


def tools(db: Database, tenant_id: str, grant_id: str) -> GrantedTools:
    return GrantedTools(db.transaction, grant_id, tenant_id, grep_limits(db.settings), 4_000)


def stored_grant(db: Database, grant_id: str) -> ExpansionGrant:
    with db.session() as s:
        row = s.get(ExpansionGrant, grant_id)
        assert row is not None
        return row


def test_the_loop_has_only_the_three_tools(db: Database, tenant: IssuedKey, family: int) -> None:
    assert [t["name"] for t in TOOLS] == ["grep", "describe", "expand"]
    granted = tools(db, tenant.tenant_id, grant(db, tenant.tenant_id, [family]))
    outcome = granted.call("expand_query", {"prompt": "recurse"})
    assert outcome.is_error
    assert "unknown tool" in outcome.text


def test_a_grant_confines_reads_to_its_conversations(
    db: Database, tenant: IssuedKey, family: int
) -> None:
    granted = tools(db, tenant.tenant_id, grant(db, tenant.tenant_id, [family]))
    found = granted.call("grep", {"pattern": "redis", "mode": "full_text", "limit": 20})
    assert not found.is_error
    assert "another family" not in found.text
    elsewhere = family + 1
    with db.session() as s:
        foreign = s.scalar(select(Summary.id).where(Summary.conversation_id == family))
    assert foreign is not None
    other_grant = tools(db, tenant.tenant_id, grant(db, tenant.tenant_id, [elsewhere]))
    denied = other_grant.call("describe", {"id": foreign})
    assert denied.is_error
    assert denied.text.startswith("not_found")
    assert other_grant.call("expand", {"summary_ids": [foreign]}).text.startswith("not_found")


def test_the_token_cap_is_debited_as_the_loop_reads(
    db: Database, tenant: IssuedKey, family: int
) -> None:
    grant_id = grant(db, tenant.tenant_id, [family], cap=60)
    granted = tools(db, tenant.tenant_id, grant_id)
    first = granted.call("grep", {"pattern": "redis", "mode": "full_text", "limit": 20})
    assert first.text.endswith("[truncated: reading budget exhausted]")
    assert stored_grant(db, grant_id).tokens_used == 60 == granted.tokens_read
    second = granted.call("grep", {"pattern": "lru"})
    assert second.is_error
    assert second.text == EXHAUSTED
    assert stored_grant(db, grant_id).tokens_used == 60


def test_an_expired_or_revoked_grant_stops_the_loop(
    db: Database, tenant: IssuedKey, family: int
) -> None:
    expired = tools(db, tenant.tenant_id, grant(db, tenant.tenant_id, [family], ttl=-1))
    with pytest.raises(GrantEnded, match="expired"):
        expired.call("grep", {"pattern": "redis"})
    grant_id = grant(db, tenant.tenant_id, [family])
    answer = execute_expand_query(
        db.transaction,
        grant_id,
        tenant.tenant_id,
        ExpandQueryRequest("what policy?", query="maxmemory policy"),
        db.settings,
        None,
    )
    assert answer.offline
    assert stored_grant(db, grant_id).revoked
    with pytest.raises(GrantEnded, match="revoked"):
        tools(db, tenant.tenant_id, grant_id).call("grep", {"pattern": "redis"})


def test_beat_sweep_revokes_expired_and_deletes_old_grants(db: Database, tenant: IssuedKey) -> None:
    live = grant(db, tenant.tenant_id, [1], ttl=600)
    expired = grant(db, tenant.tenant_id, [1], ttl=-60)
    with db.transaction() as s:
        swept = sweep_grants(s, utcnow(), retention=timedelta(hours=1))
    assert (swept.revoked, swept.deleted) == (1, 0)
    assert stored_grant(db, expired).revoked
    assert not stored_grant(db, live).revoked
    with db.transaction() as s:
        swept = sweep_grants(s, utcnow() + timedelta(hours=2), retention=timedelta(hours=1))
    assert swept.deleted == 2


@pytest.mark.parametrize("db", ["postgres"], indirect=True)
def test_beat_sweep_finds_its_grants_through_indexes(db: Database, tenant: IssuedKey) -> None:
    """The sweep reads the live grants and the old ones, not the table (``tests/sql_plans.py``)."""
    grant(db, tenant.tenant_id, [1], ttl=600)
    grant(db, tenant.tenant_id, [1], ttl=-60)
    with recording(db.engine) as statements, db.transaction() as s:
        sweep_grants(s, utcnow(), retention=timedelta(hours=1))
    verbs = [s.lstrip().split(None, 1)[0].upper() for s, _ in statements]
    assert {"UPDATE", "DELETE"} <= set(verbs)
    scans = sequential_scans(db.engine, statements)
    assert scans == [], "\n\n".join(scans)


def test_offline_answer_is_marked_and_cites_what_it_read(
    db: Database, tenant: IssuedKey, family: int
) -> None:
    with db.transaction() as s:
        top = s.scalar(select(Summary.id).where(Summary.conversation_id == family))
        request = ExpandQueryRequest("Which policy?", "allkeys-lru", (str(top),), max_tokens=300)
        g = start_expand_query(s, tenant.tenant_id, ScopeSelector(), request, db.settings)
    assert g.conversation_ids == {family}  # scoped to the summary's conversation
    answer = execute_expand_query(
        db.transaction, g.id, tenant.tenant_id, request, db.settings, None
    )
    assert answer.answer.startswith(OFFLINE_MARK)
    assert answer.offline
    assert answer.cited_ids
    assert all(ref in answer.answer for ref in answer.cited_ids)
    assert "another family" not in answer.answer
    assert len(answer.answer) <= 300 * 4


def test_start_refuses_foreign_summaries(db: Database, tenant: IssuedKey, family: int) -> None:
    other = new_tenant(db, "other")
    with db.session() as s:
        top = str(s.scalar(select(Summary.id).where(Summary.conversation_id == family)))
        with pytest.raises(NotFound):
            start_expand_query(
                s,
                other.tenant_id,
                ScopeSelector(),
                ExpandQueryRequest("q", None, (top,)),
                db.settings,
            )
        with pytest.raises(NotFound):  # mine, but outside the named family
            start_expand_query(
                s,
                tenant.tenant_id,
                ScopeSelector(session_key="agent:elsewhere"),
                ExpandQueryRequest("q", None, (top,)),
                db.settings,
            )


@pytest.fixture
def fake_llm() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as server:
        yield server


def test_tool_loop_through_the_sdk(
    db: Database, tenant: IssuedKey, family: int, fake_llm: FakeAnthropicServer
) -> None:
    with db.session() as s:
        top = str(s.scalar(select(Summary.id).where(Summary.conversation_id == family)))
    settings: Settings = db.settings.model_copy(
        update={
            "anthropic_api_key": SecretStr("sk-test"),
            "anthropic_base_url": fake_llm.base_url,
            "expansion_model": "claude-expander",
            "llm_max_retries": 0,
        }
    )
    llm = LlmClients.from_settings(settings)
    assert llm is not None
    fake_llm.script(
        [
            Behaviour.tool_use("grep", {"pattern": "maxmemory", "mode": "full_text"}),
            Behaviour.tool_use("expand", {"summary_ids": [top], "token_cap": 200}),
            Behaviour.reply(f"The policy is allkeys-lru [{top}] [msg_99999]."),
        ]
    )
    with db.transaction() as s:
        request = ExpandQueryRequest("Which eviction policy?", "maxmemory", max_tokens=500)
        g = start_expand_query(s, tenant.tenant_id, ScopeSelector("agent:main"), request, settings)
    answer = execute_expand_query(db.transaction, g.id, tenant.tenant_id, request, settings, llm)
    assert answer.answer.startswith("The policy is allkeys-lru")
    assert answer.cited_ids == [top]  # msg_99999 was never shown to the model: dropped
    assert not answer.offline
    assert answer.turns == 3
    requests = fake_llm.requests
    assert len(requests) == 3
    assert {r.model for r in requests} == {"claude-expander"}
    assert [t["name"] for t in requests[0].body["tools"]] == ["grep", "describe", "expand"]
    results: list[Any] = requests[1].messages[-1]["content"]
    assert results[0]["type"] == "tool_result"
    assert "maxmemory" in results[0]["content"]
    assert requests[2].messages[-1]["content"][0]["content"].startswith('{"nodes"')
    assert stored_grant(db, g.id).revoked
    assert stored_grant(db, g.id).tokens_used > 0
    with db.session() as s:
        usage = s.scalar(
            select(func.count()).select_from(LlmUsage).where(LlmUsage.purpose == "expansion")
        )
    assert usage == 3


def test_the_last_turn_withholds_tools(
    db: Database, tenant: IssuedKey, family: int, fake_llm: FakeAnthropicServer
) -> None:
    settings = db.settings.model_copy(
        update={
            "anthropic_api_key": SecretStr("sk-test"),
            "anthropic_base_url": fake_llm.base_url,
            "expand_query_max_turns": 2,
        }
    )
    fake_llm.set_default(Behaviour.tool_use("grep", {"pattern": "redis"}))
    request = ExpandQueryRequest("loop forever?", "redis")
    grant_id = grant(db, tenant.tenant_id, [family])
    answer = execute_expand_query(
        db.transaction,
        grant_id,
        tenant.tenant_id,
        request,
        settings,
        LlmClients.from_settings(settings),
    )
    bodies = [r.body for r in fake_llm.requests]
    assert len(bodies) == 3
    assert answer.turns == 3
    assert [b["tool_choice"]["type"] for b in bodies] == ["auto", "auto", "none"]


@pytest.mark.celery
def test_expand_query_through_a_real_worker(celery_worker: Any, pg_db: Database) -> None:
    from workers.tasks.expansion import submit_and_wait

    tenant = new_tenant(pg_db)
    cid = ingest(pg_db, tenant.tenant_id, "agent:main", HISTORY)
    request = ExpandQueryRequest("Which policy?", "allkeys-lru")
    with pg_db.transaction() as s:
        g = start_expand_query(
            s, tenant.tenant_id, ScopeSelector(conversation_id=cid), request, settings_for("x")
        )
    submit_and_wait(g.id, 60)
    result = take_answer(pg_db.transaction, g.id)
    assert result is not None
    assert result["offline"] is True
    assert result["answer"].startswith(OFFLINE_MARK)
    assert result["cited_ids"]
    assert all(r.startswith("msg_") for r in result["cited_ids"])
    taken = stored_grant(pg_db, g.id)
    assert taken.revoked
    # Read once: neither the prompt nor the answer stays on the grant.
    assert taken.request is None
    assert taken.answer is None

"""expand-query over several conversations: ranking, top K, one deadline, one budget, the lease.

The loop talks to the fake Messages API server through the real SDK.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from pydantic import SecretStr
from sqlalchemy import select

from lcm.db.engine import Database
from lcm.db.models import ExpansionGrant, ExpansionLease, LlmUsage, utcnow
from lcm.errors import ExpansionBusy
from lcm.retrieval.answers import ExpandQueryAnswer, ExpandQueryRequest
from lcm.retrieval.expansion import execute_expand_query, start_expand_query
from lcm.retrieval.expansion_lease import hold_session, release_session
from lcm.retrieval.grants import sweep_grants
from lcm.retrieval.scope import ScopeSelector
from lcm.settings import Settings
from lcm.summarize.llm import LlmClients
from lcm.tenants.service import IssuedKey
from tests.fakes import Behaviour, FakeAnthropicServer
from tests.integration.retrieval_data import ingest

FAMILY = "agent:main"
QUESTION = ExpandQueryRequest("What was the zebra migration plan?", "zebra migration")


@pytest.fixture
def fake_llm() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as server:
        yield server


@pytest.fixture
def conversations(db: Database, tenant: IssuedKey) -> dict[str, int]:
    """One family, three conversations: a strong match, a weak one, none."""
    tid = tenant.tenant_id
    return {
        "strong": ingest(
            db,
            tid,
            FAMILY,
            ["the zebra migration plan: move the zebra migration to region b"] * 3,
            session_id="s1",
        ),
        "weak": ingest(
            db,
            tid,
            FAMILY,
            [
                "notes on the old cluster, its migration to new disks, and much else besides; "
                "the zebra dashboards were renamed during the week as well"
            ],
            session_id="s2",
        ),
        "none": ingest(db, tid, FAMILY, ["cooking notes: bake the bread at 220"], session_id="s3"),
    }


def llm_settings(db: Database, fake: FakeAnthropicServer, **update: Any) -> Settings:
    settings: Settings = db.settings.model_copy(
        update={
            "anthropic_api_key": SecretStr("sk-test"),
            "anthropic_base_url": fake.base_url,
            "llm_max_retries": 0,
            **update,
        }
    )
    return settings


def ask(
    db: Database,
    tenant: IssuedKey,
    settings: Settings,
    request: ExpandQueryRequest = QUESTION,
    selector: ScopeSelector = ScopeSelector(FAMILY),
) -> tuple[ExpandQueryAnswer, ExpansionGrant]:
    llm = LlmClients.from_settings(settings)
    with db.transaction() as s:
        grant = start_expand_query(s, tenant.tenant_id, selector, request, settings)
    answer = execute_expand_query(db.transaction, grant.id, tenant.tenant_id, None, settings, llm)
    with db.session() as s:
        row = s.get(ExpansionGrant, grant.id)
        assert row is not None
        s.expunge(row)
    return answer, row


def statuses(answer: ExpandQueryAnswer) -> list[tuple[int, str]]:
    return [(o.conversation_id, o.status) for o in answer.conversations]


def test_the_best_ranked_conversations_are_expanded_and_the_rest_reported(
    db: Database, tenant: IssuedKey, conversations: dict[str, int], fake_llm: FakeAnthropicServer
) -> None:
    strong, weak, none = conversations["strong"], conversations["weak"], conversations["none"]
    fake_llm.script([Behaviour.tool_use("grep", {"pattern": "zebra", "mode": "full_text"})])
    answer, grant = ask(db, tenant, llm_settings(db, fake_llm))
    assert statuses(answer) == [(strong, "answered"), (weak, "answered"), (none, "no_match")]
    assert answer.source_conversation_ids == [strong, weak]
    assert not answer.truncated
    scores = [o.score for o in answer.conversations]
    assert scores[0] is not None
    assert scores[1] is not None
    assert scores[0] > scores[1]
    assert answer.conversations[0].session_key == FAMILY
    assert answer.answer.startswith(f"Conversation {strong} ({FAMILY}):")
    assert f"Conversation {weak} ({FAMILY}):" in answer.answer
    # The grant covers the expanded conversations only, and each loop reads its own.
    assert sorted(grant.conversation_ids) == sorted([strong, weak])
    first_result = fake_llm.requests[1].messages[-1]["content"][0]["content"]
    assert f'"conversation_id":{strong}' in first_result
    assert f'"conversation_id":{weak}' not in first_result
    assert answer.conversations[0].tokens > 0
    assert answer.tokens_read == sum(o.tokens for o in answer.conversations)
    assert len(fake_llm.requests) == 3  # strong: grep, answer; weak: answer


def test_only_the_top_k_are_expanded_and_the_answer_says_truncated(
    db: Database, tenant: IssuedKey, conversations: dict[str, int], fake_llm: FakeAnthropicServer
) -> None:
    also = ingest(db, tenant.tenant_id, FAMILY, ["a zebra; a migration"], session_id="s5")
    settings = llm_settings(db, fake_llm, expand_query_top_conversations=1)
    answer, grant = ask(db, tenant, settings)
    strong, none = conversations["strong"], conversations["none"]
    # The weak matches were ranked below the top 1: not expanded, and not "no_match".
    assert statuses(answer) == [(strong, "answered"), (none, "no_match")]
    assert answer.truncated
    assert also not in {o.conversation_id for o in answer.conversations}
    assert grant.conversation_ids == [strong]
    assert len(fake_llm.requests) == 1
    assert not answer.answer.startswith("Conversation")  # one answer, no headings


def test_a_conversation_with_many_matches_does_not_hide_the_others(
    db: Database, tenant: IssuedKey, fake_llm: FakeAnthropicServer
) -> None:
    """Ranked by each conversation's best match, not by a row limit over all matches."""
    tid = tenant.tenant_id
    busy = ingest(db, tid, FAMILY, [f"zebra migration step {i}" for i in range(230)])
    quiet = ingest(
        db, tid, FAMILY, ["the zebra herd, and later a migration of disks"], session_id="q"
    )
    answer, _ = ask(db, tenant, llm_settings(db, fake_llm))
    assert statuses(answer) == [(busy, "answered"), (quiet, "answered")]
    assert not answer.truncated


def test_messages_not_yet_indexed_are_ranked_too(
    db: Database, tenant: IssuedKey, fake_llm: FakeAnthropicServer
) -> None:
    """SQLite's search backlog (ingested, not yet in the FTS index) counts for the ranking."""
    tid = tenant.tenant_id
    first = ingest(db, tid, FAMILY, ["zebra migration on monday"], index=False)
    second = ingest(db, tid, FAMILY, ["a zebra, then a migration"], session_id="b", index=False)
    answer, _ = ask(db, tenant, llm_settings(db, fake_llm))
    assert [o.conversation_id for o in answer.conversations] == [first, second]
    assert answer.source_conversation_ids == [first, second]


def test_one_deadline_covers_every_conversation(
    db: Database, tenant: IssuedKey, conversations: dict[str, int], fake_llm: FakeAnthropicServer
) -> None:
    """Each model call takes 1 s and the call has 1.8 s: the second loop runs out of time."""
    third = ingest(db, tenant.tenant_id, FAMILY, ["zebra migration, a third time"], session_id="s4")
    fake_llm.set_default(Behaviour.ok(delay=1.0))
    request = ExpandQueryRequest(QUESTION.prompt, QUESTION.query, timeout_ms=1_800)
    answer, _ = ask(db, tenant, llm_settings(db, fake_llm), request)
    expanded = [o for o in answer.conversations if o.status != "no_match"]
    assert [o.status for o in expanded] == ["answered", "timed_out", "timed_out"]
    assert answer.truncated
    assert answer.timeout_ms == 1_800
    assert answer.source_conversation_ids == [expanded[0].conversation_id]
    assert expanded[1].error is not None
    assert expanded[1].elapsed_ms > 0
    assert expanded[2].error is not None
    assert expanded[2].error.code == "deadline_passed"
    assert third in {o.conversation_id for o in answer.conversations}
    assert "Traceback" not in str(answer.conversations)


def test_a_loop_cut_by_the_deadline_still_records_what_it_cost(
    db: Database, tenant: IssuedKey, conversations: dict[str, int], fake_llm: FakeAnthropicServer
) -> None:
    fake_llm.script([Behaviour.tool_use("grep", {"pattern": "zebra", "mode": "full_text"})])
    fake_llm.set_default(Behaviour.ok(delay=3.0))  # the second turn outlives the deadline
    request = ExpandQueryRequest(QUESTION.prompt, QUESTION.query, timeout_ms=1_000)
    answer, _ = ask(db, tenant, llm_settings(db, fake_llm), request)
    assert answer.conversations[0].status == "timed_out"
    assert answer.conversations[0].tokens > 0
    assert answer.source_conversation_ids == []
    assert len(answer.usage) == 1  # the first turn's reply
    with db.session() as s:
        rows = s.scalars(select(LlmUsage).where(LlmUsage.purpose == "expansion")).all()
    assert len(rows) == 1


def test_the_reading_budget_is_shared_across_conversations(
    db: Database, tenant: IssuedKey, conversations: dict[str, int], fake_llm: FakeAnthropicServer
) -> None:
    fake_llm.script(
        [
            Behaviour.tool_use("grep", {"pattern": "zebra", "mode": "full_text"}),
            Behaviour.reply("The plan was to move it to region b."),
        ]
    )
    settings = llm_settings(db, fake_llm, expand_query_token_cap=40)
    answer, grant = ask(db, tenant, settings)
    strong, weak = conversations["strong"], conversations["weak"]
    assert statuses(answer)[:2] == [(strong, "answered"), (weak, "skipped_budget")]
    assert answer.conversations[0].tokens == 40
    assert answer.conversations[1].tokens == 0
    assert answer.truncated
    assert grant.tokens_used == 40
    assert len(fake_llm.requests) == 2  # the second conversation never reached the model


def test_timeout_ms_is_capped_by_the_server(
    db: Database, tenant: IssuedKey, conversations: dict[str, int], fake_llm: FakeAnthropicServer
) -> None:
    settings = llm_settings(db, fake_llm, expand_query_timeout_seconds=7.0)
    asked = ExpandQueryRequest(QUESTION.prompt, QUESTION.query, timeout_ms=3_600_000)
    answer, grant = ask(
        db, tenant, settings, asked, ScopeSelector(conversation_id=conversations["strong"])
    )
    assert answer.timeout_ms == 7_000
    assert grant.expires_at - grant.created_at < timedelta(seconds=60)


def test_one_lease_per_session_under_a_race(db: Database, tenant: IssuedKey) -> None:
    """Two takers at once: exactly one holds the lease; expiry and release free it."""
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def take(owner: str) -> None:
        barrier.wait()
        try:
            with db.transaction() as s:
                hold_session(s, tenant.tenant_id, FAMILY, owner, utcnow(), 60)
            outcomes.append("held")
        except ExpansionBusy:
            outcomes.append("busy")

    threads = [threading.Thread(target=take, args=(f"grant_{i}",)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(outcomes) == ["busy", "held"]
    with db.session() as s:
        holder = s.scalars(select(ExpansionLease.owner)).one()
    loser = "grant_0" if holder == "grant_1" else "grant_1"
    with db.transaction() as s:
        release_session(s, tenant.tenant_id, FAMILY, loser)  # not the holder: no effect
    with pytest.raises(ExpansionBusy), db.transaction() as s:
        hold_session(s, tenant.tenant_id, FAMILY, "grant_x", utcnow(), 60)
    # Another session of the tenant is not blocked.
    with db.transaction() as s:
        hold_session(s, tenant.tenant_id, "agent:other", "grant_y", utcnow(), 60)
    # Past its expiry (a crashed API process), the lease is taken over.
    with db.transaction() as s:
        hold_session(s, tenant.tenant_id, FAMILY, "grant_z", utcnow() + timedelta(seconds=61), 60)
    with db.transaction() as s:
        release_session(s, tenant.tenant_id, FAMILY, holder)  # the old holder, late: no effect
        release_session(s, tenant.tenant_id, FAMILY, "grant_z")
    with db.transaction() as s:
        hold_session(s, tenant.tenant_id, FAMILY, "grant_w", utcnow(), 60)
    # Beat's sweep deletes expired leases only.
    with db.transaction() as s:
        assert sweep_grants(s, utcnow(), timedelta(hours=1)).leases == 0
        assert sweep_grants(s, utcnow() + timedelta(seconds=61), timedelta(hours=1)).leases == 2

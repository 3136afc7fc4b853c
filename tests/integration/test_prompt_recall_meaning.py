"""The prompt recall cue by meaning where semantic recall is on, on both databases.

An old message out of the assembled window answers a prompt that shares no
word with it: recalled by meaning (full text and the identifier lookups find
nothing), above the similarity floor; an unrelated prompt recalls nothing;
the tenant's ``prompt_recall_semantic`` turns it off; a dense search past its
deadline is given up, never the assembly. expand-query's ranking by meaning
keeps the same floor: an unrelated query matches no conversation.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, text

from lcm.db.engine import Database
from lcm.db.models import Message
from lcm.retrieval.expansion import grep_limits
from lcm.retrieval.expansion_plan import PlanInputs, plan_expansion
from lcm.semantic import PROMPT_VECTORS
from lcm.tenants.service import IssuedKey
from tests.conftest import RecordingSender, api_client, auth, new_tenant
from tests.e2e.test_sessions_http import patch
from tests.integration.semantic_helpers import CAR, FILLER, post_messages, run_jobs

KEY = "agent:cue"
BUDGET = 220
# Shares no word with CAR (full text cannot find it) and names no identifier.
PARAPHRASE = "why did my vehicle fail to crank earlier today?"
UNRELATED = "How do I configure TLS certificates for nginx?"
MEANING_LOG = "lcm.retrieval.prompt_meaning"


def history() -> list[str]:
    """The car message, then turns about other things that push it out of the window."""
    return [CAR] + [f"Note {i}: {FILLER[i % len(FILLER)]}" for i in range(40)]


def assemble(client: TestClient, who: IssuedKey, **extra: Any) -> Any:
    body = {"token_budget": BUDGET, **extra}
    r = client.post(f"/v1/conversations/{KEY}/assemble", json=body, headers=auth(who))
    assert r.status_code == 200, r.text
    return r.json()


@pytest.fixture
def who(sdb: Database, sclient: TestClient, sender: RecordingSender) -> IssuedKey:
    tenant = new_tenant(sdb)
    patch(sclient, tenant, fresh_tail_count=4)
    post_messages(sclient, tenant, KEY, history())
    run_jobs(sdb, sender)
    return tenant


@pytest.fixture(autouse=True)
def fresh_prompt_vectors() -> Iterator[None]:
    """Each test embeds its prompts itself (the deadline test depends on it)."""
    PROMPT_VECTORS.clear()
    yield
    PROMPT_VECTORS.clear()


def car_id(db: Database) -> int:
    with db.read_session() as s:
        found = s.scalar(select(Message.id).where(Message.content == CAR))
    assert found is not None
    return int(found)


def test_a_paraphrased_prompt_recalls_the_message_that_answers_it(
    sdb: Database,
    sclient: TestClient,
    who: IssuedKey,
) -> None:
    plain = assemble(sclient, who)
    assert "battery" not in str(plain["messages"]), "the answer is outside the window"
    # Full text finds no word of the prompt; it names no identifier.
    r = sclient.post(
        "/v1/grep",
        json={"pattern": PARAPHRASE, "mode": "full_text", "all_conversations": True},
        headers=auth(who),
    )
    assert r.status_code == 200, r.text
    assert r.json()["matches"] == []

    out = assemble(sclient, who, prompt=PARAPHRASE)
    [recalled] = out["recalled"]
    assert recalled["message_id"] == car_id(sdb)
    assert recalled["identifier"] == ""
    assert recalled["similarity"] >= sdb.settings.semantic_min_similarity
    assert recalled["text"] == CAR
    block = str(out["messages"][recalled["message_index"]])
    assert "<recalled_history>" in block
    assert f'id="msg_{recalled["message_id"]}"' in block
    assert 'similarity="' in block
    assert out["estimated_tokens"] <= BUDGET
    # The fresh tail still closes the window (the block joins its user turn).
    assert out["messages"][-1]["content"][-1] == plain["messages"][-1]["content"][-1]

    # Assembled again (a gateway's second pass): the same, its vector kept.
    assert assemble(sclient, who, prompt=PARAPHRASE) == out

    # The tenant turns recall by meaning off: identifiers only, so nothing here.
    patch(sclient, who, prompt_recall_semantic=False)
    assert assemble(sclient, who, prompt=PARAPHRASE) == plain
    # And a floor above the message's similarity keeps it out too.
    patch(sclient, who, prompt_recall_semantic=True, semantic_min_similarity=0.95)
    assert assemble(sclient, who, prompt=PARAPHRASE) == plain


def test_an_unrelated_prompt_recalls_nothing(
    sclient: TestClient,
    who: IssuedKey,
) -> None:
    plain = assemble(sclient, who)
    for prompt in (UNRELATED, "continue", "thanks, that looks good"):
        out = assemble(sclient, who, prompt=prompt)
        assert out["recalled"] == [], prompt
        assert out == plain
    # Without the floor the dense side always has nearest texts: recalled.
    patch(sclient, who, semantic_min_similarity=0.0)
    assert assemble(sclient, who, prompt=UNRELATED)["recalled"] != []


def test_an_identifier_and_a_meaning_are_fused(
    sdb: Database,
    sclient: TestClient,
    sender: RecordingSender,
    who: IssuedKey,
) -> None:
    relay = "We set ORBIT_RELAY_PORT to 7443 in the staging config."
    # A prompt of two questions is less near each answer than one alone: a
    # lower floor than the default, which the next test keeps, for these short texts.
    patch(sclient, who, semantic_min_similarity=0.35)
    post_messages(sclient, who, KEY, [relay, *[f"Later {i}: {FILLER[i % 5]}" for i in range(30)]])
    run_jobs(sdb, sender)
    out = assemble(sclient, who, prompt=f"{PARAPHRASE} And what is ORBIT_RELAY_PORT?")
    found = {(r["identifier"], r["text"]) for r in out["recalled"]}
    assert ("ORBIT_RELAY_PORT", relay) in found
    assert ("", CAR) in found
    # The exact identifier's snippet comes first on a tie of ranks.
    assert out["recalled"][0]["identifier"] == "ORBIT_RELAY_PORT"


def test_a_dense_search_past_its_deadline_is_given_up_not_the_assembly(
    sdb: Database,
    sender: RecordingSender,
    who: IssuedKey,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """1 ms: embedding the prompt alone takes longer, so the search is skipped."""
    settings = sdb.settings.model_copy(update={"statement_timeout_ms": 1})
    for client in api_client(settings, sdb, sender):
        plain = assemble(client, who)
        with caplog.at_level(logging.WARNING, logger=MEANING_LOG):
            out = assemble(client, who, prompt=PARAPHRASE)
        assert out["recalled"] == []
        assert out == plain
        assert any("meaning search ran out of time" in r.message for r in caplog.records)


def test_a_dense_query_cancelled_at_its_deadline_keeps_the_assembly_and_the_names(
    who_pg: tuple[Database, IssuedKey],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Postgres: the vectors locked by another transaction; the statement is cancelled
    at the deadline, its savepoint rolled back, the identifier snippet kept."""
    database, who = who_pg
    prompt = f"{PARAPHRASE} And BUILD_RUNNER_POOL?"
    settings = database.settings.model_copy(update={"statement_timeout_ms": 300})
    for client in api_client(settings, database, RecordingSender()):
        warm = assemble(client, who, prompt=prompt)  # the prompt's vector is kept now
        assert {r["identifier"] for r in warm["recalled"]} == {"", "BUILD_RUNNER_POOL"}
        with database.engine.connect() as locker:
            locker.execute(text("LOCK TABLE embeddings IN ACCESS EXCLUSIVE MODE"))
            with caplog.at_level(logging.WARNING):
                out = assemble(client, who, prompt=prompt)
            locker.rollback()
        assert [r["identifier"] for r in out["recalled"]] == ["BUILD_RUNNER_POOL"]
        assert any("meaning search ran out of time" in r.message for r in caplog.records)


@pytest.fixture
def who_pg(pg_db: Database) -> Iterator[tuple[Database, IssuedKey]]:
    from tests.integration.semantic_helpers import run_jobs as embed

    database = Database(pg_db.settings.model_copy(update={"semantic": True}), RecordingSender())
    recorder = database.sender
    assert isinstance(recorder, RecordingSender)
    for client in api_client(database.settings, database, recorder):
        tenant = new_tenant(database)
        patch(client, tenant, fresh_tail_count=4, semantic_min_similarity=0.35)
        pool = "BUILD_RUNNER_POOL has eight hosts."
        post_messages(client, tenant, KEY, [CAR, pool, *history()[1:]])
        embed(database, recorder)
        yield database, tenant
    database.dispose()


def test_expand_query_ranking_by_meaning_keeps_the_floor(
    sdb: Database,
    sclient: TestClient,
    sender: RecordingSender,
) -> None:
    tenant = new_tenant(sdb)
    car = post_messages(sclient, tenant, "agent:car", [CAR, "Thanks, I will call a mechanic."])
    other = post_messages(sclient, tenant, "agent:other", FILLER)
    run_jobs(sdb, sender)
    limits = grep_limits(sdb.settings)
    scope = [car, other]
    with sdb.transaction() as session:
        unrelated = plan_expansion(
            session, PlanInputs(tenant.tenant_id, scope, UNRELATED, [], 4), limits, 0.0, 1000
        )
        near = plan_expansion(
            session, PlanInputs(tenant.tenant_id, scope, PARAPHRASE, [], 4), limits, 0.0, 1000
        )
    # Nothing near the query and no word of it: no conversation matched.
    assert unrelated.expand == ()
    assert sorted(c.conversation_id for c in unrelated.unmatched) == sorted(scope)
    # A paraphrase still ranks its conversation; the other is no_match.
    assert [c.conversation_id for c in near.expand] == [car]
    assert [c.conversation_id for c in near.unmatched] == [other]

"""Semantic recall where it is on, beyond grep itself: the console's search page,
expand-query's conversation ranking and its offline answer.

With the deployment's semantic recall off, the console offers no semantic
mode and refuses one asked for by URL (its own error line, not a 422).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from lcm.db.engine import Database
from lcm.db.models import utcnow
from lcm.retrieval.agent_tools import GrantedTools
from lcm.retrieval.answers import ExpandQueryRequest
from lcm.retrieval.expansion import grep_limits
from lcm.retrieval.expansion_plan import PlanInputs, plan_expansion
from lcm.retrieval.grants import issue_grant
from lcm.retrieval.offline_answer import offline_answer
from lcm.tenants.service import IssuedKey
from tests.conftest import RecordingSender, api_client, new_tenant
from tests.integration.semantic_helpers import CAR, FILLER, post_messages, run_jobs

PARAPHRASE = "vehicle failed to turn over"
# Nearer CAR than PARAPHRASE (0.52 against 0.42): above expand-query's
# ranking floor, semantic_min_similarity (0.45).
NEAR_CAR = "why did my vehicle fail to crank earlier today?"


def signed_in(client: TestClient, who: IssuedKey) -> TestClient:
    page = client.get("/console/login").text
    found = re.search(r'name="login_token" value="([^"]+)"', page)
    assert found is not None
    form = {"api_key": who.api_key, "login_token": found.group(1)}
    done = client.post("/console/login", data=form, follow_redirects=False)
    assert done.status_code == 303, done.text
    return client


@pytest.fixture
def plain_client(sqlite_db: Database) -> Iterator[TestClient]:
    yield from api_client(sqlite_db.settings, sqlite_db, RecordingSender())


def test_console_search_defaults_to_hybrid_and_finds_a_paraphrase(
    sdb: Database,
    sclient: TestClient,
    sender: RecordingSender,
) -> None:
    who = new_tenant(sdb)
    post_messages(sclient, who, "agent:main", [CAR, *FILLER])
    run_jobs(sdb, sender)
    browser = signed_in(sclient, who)
    page = browser.get("/console/search", params={"q": PARAPHRASE}).text
    assert '<option value="hybrid" selected>' in page
    assert '<option value="semantic">' in page
    hits = page.split('<li class="result message">')
    assert len(hits) > 1, page
    assert "battery was completely dead" in hits[1]
    # Full text, still offered, misses the paraphrase.
    words = browser.get("/console/search", params={"q": PARAPHRASE, "mode": "full_text"}).text
    assert '<li class="result' not in words
    assert '<option value="full_text" selected>' in words
    by_meaning = browser.get("/console/search", params={"q": PARAPHRASE, "mode": "semantic"})
    assert by_meaning.status_code == 200
    assert "battery was completely dead" in by_meaning.text


def test_console_search_offers_no_semantic_mode_where_it_is_off(
    sqlite_db: Database, plain_client: TestClient
) -> None:
    who = new_tenant(sqlite_db)
    post_messages(plain_client, who, "agent:main", [CAR, *FILLER])
    browser = signed_in(plain_client, who)
    page = browser.get("/console/search", params={"q": "battery"}).text
    assert 'value="hybrid"' not in page
    assert 'value="semantic"' not in page
    assert '<option value="full_text" selected>' in page
    assert '<li class="result message">' in page
    asked = browser.get("/console/search", params={"q": "battery", "mode": "hybrid"})
    assert asked.status_code == 200
    assert '<p class="error">' in asked.text
    assert "LCM_SEMANTIC" in asked.text


def test_expand_query_ranks_conversations_by_meaning_where_semantic_is_on(
    sdb: Database,
    sclient: TestClient,
    sender: RecordingSender,
) -> None:
    who = new_tenant(sdb)
    other = post_messages(sclient, who, "agent:other", FILLER)
    car = post_messages(sclient, who, "agent:car", [CAR, "Thanks, I will call a mechanic."])
    run_jobs(sdb, sender)
    limits = grep_limits(sdb.settings)
    with sdb.transaction() as session:
        by_meaning = plan_expansion(
            session, PlanInputs(who.tenant_id, None, NEAR_CAR, [], 1), limits, 0.0, 1000
        )
        by_words = plan_expansion(
            session, PlanInputs(who.tenant_id, None, "lentil soup", [], 1), limits, 0.0, 1000
        )
    # Full text finds no word of the paraphrase; hybrid ranks the car conversation first.
    assert [c.conversation_id for c in by_meaning.expand] == [car]
    assert by_meaning.expand[0].score is not None
    # Nothing in the other conversation is near the query (the floor): not matched.
    assert by_meaning.not_expanded == 0
    # A full-text match still wins its conversation the first place.
    assert [c.conversation_id for c in by_words.expand] == [other]


def test_the_offline_answer_falls_back_to_hybrid_where_nothing_matches_exactly(
    sdb: Database,
    sclient: TestClient,
    sender: RecordingSender,
) -> None:
    who = new_tenant(sdb)
    cid = post_messages(sclient, who, "agent:main", [CAR, *FILLER])
    run_jobs(sdb, sender)
    with sdb.transaction() as session:
        grant_id = issue_grant(session, who.tenant_id, [cid], 10_000, 60, utcnow()).id
    tools = GrantedTools(sdb.transaction, grant_id, who.tenant_id, grep_limits(sdb.settings), 4_000)
    answer = offline_answer(tools, ExpandQueryRequest("Why was I late?", PARAPHRASE))
    lines = answer.answer.splitlines()
    assert "Nothing in the granted history matched." not in lines
    assert "battery was completely dead" in lines[2]

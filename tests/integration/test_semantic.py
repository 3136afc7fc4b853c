"""Semantic recall end to end on both databases: embedding after commit, the
backfill and its lease, and grep's semantic and hybrid modes.

The embedder is the real model (the semantic extra is part of the test
install). Jobs are recorded by a ``RecordingSender`` and run here as the
worker would run them; ``tests/integration/test_semantic_worker.py`` runs
them in a real Celery worker.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from lcm.db.engine import Database
from lcm.db.models import Embedding, utcnow
from lcm.outbox import EmbedConversation
from lcm.semantic.backfill import LEASE, embed_conversation, run_backfill
from lcm.semantic.embedder import Embedder, load_embedder
from lcm.semantic.repository import EmbeddingRunRepository
from lcm.semantic.search import DenseQuery, dense_search
from lcm.tenants.service import IssuedKey
from tests.conftest import RecordingSender, api_client, auth, new_tenant
from tests.integration.retrieval_data import compact
from tests.integration.semantic_helpers import (
    CAR,
    FILLER,
    grep,
    plain,
    post_messages,
    run_jobs,
    vectors,
)


def test_ingest_asks_for_embedding_after_commit_and_does_not_wait(
    sdb: Database, sclient: TestClient, sender: RecordingSender
) -> None:
    who = new_tenant(sdb)
    cid = post_messages(sclient, who, "agent:main", [CAR, *FILLER])
    # The request answered with nothing embedded: the vectors are the job's.
    assert vectors(sdb) == 0
    assert EmbedConversation(cid) in sender.jobs
    run_jobs(sdb, sender)
    assert vectors(sdb, load_embedder().model_name) == 1 + len(FILLER)
    # Running the job again (a duplicate delivery) embeds nothing twice.
    assert embed_conversation(sdb.transaction, load_embedder(), cid, 64) == 0
    assert vectors(sdb) == 1 + len(FILLER)
    # Erasing the conversation erases its vectors.
    response = sclient.delete("/v1/conversations/agent:main", headers=auth(who))
    assert response.status_code == 204, response.text
    assert vectors(sdb) == 0


def test_a_paraphrase_is_found_by_semantic_and_hybrid_where_full_text_misses(
    sdb: Database, sclient: TestClient, sender: RecordingSender
) -> None:
    who = new_tenant(sdb)
    post_messages(sclient, who, "agent:main", [CAR, *FILLER])
    run_jobs(sdb, sender)
    question = "vehicle failed to turn over"
    assert grep(sclient, who, question, "full_text")["matches"] == []
    semantic = grep(sclient, who, question, "semantic", limit=3)
    assert semantic["mode"] == "semantic"
    assert semantic["complete"] is True
    assert CAR in semantic["matches"][0]["snippet"]
    assert semantic["matches"][0]["ref"].startswith("msg_")
    hybrid = grep(sclient, who, question, "hybrid", limit=3, sort="relevance")
    assert CAR in hybrid["matches"][0]["snippet"]


def test_hybrid_finds_a_message_not_embedded_yet_through_full_text(
    sdb: Database, sclient: TestClient, sender: RecordingSender
) -> None:
    who = new_tenant(sdb)
    post_messages(sclient, who, "agent:main", FILLER)
    run_jobs(sdb, sender)
    post_messages(sclient, who, "agent:main", ["the zanzibar rollout is blocked on QA"])
    sender.jobs.clear()  # its embed job has not run
    found = grep(sclient, who, "zanzibar rollout", "hybrid")
    assert [m["snippet"] for m in found["matches"] if "zanzibar" in m["snippet"]]
    semantic = grep(sclient, who, "zanzibar rollout", "semantic")
    assert not [m for m in semantic["matches"] if "zanzibar" in m["snippet"]]


def test_hybrid_full_text_reads_a_question_as_its_keywords_any_of_them(
    sdb: Database, sclient: TestClient, sender: RecordingSender
) -> None:
    who = new_tenant(sdb)
    answer = "Final call: the dev server listens on port 8443 from now on."
    post_messages(sclient, who, "agent:main", [*FILLER, answer, "The dev team meets on Monday."])
    sender.jobs.clear()  # nothing embedded: what hybrid finds is its full-text side's
    question = "which port did we move the dev server to in the end?"
    assert grep(sclient, who, question, "full_text")["matches"] == []  # still ANDed
    found = grep(sclient, who, question, "hybrid", sort="relevance")
    snippets = [plain(m["snippet"]) for m in found["matches"]]
    # Both hold a keyword; the one holding more of them ranks first.
    assert answer in snippets[0], snippets
    assert [s for s in snippets if "dev team" in s]
    assert found["matches"][0]["score"] == pytest.approx(1 / 61, abs=1e-6)  # rank 1 of one side


def test_hybrid_keywords_keep_phrases_and_exclusions(
    sdb: Database, sclient: TestClient, sender: RecordingSender
) -> None:
    who = new_tenant(sdb)
    dev = "the dev server listens on port 8443"
    staging = "the staging box listens on port 9000"
    builds = "the server for dev builds is slow"
    post_messages(sclient, who, "agent:main", [dev, staging, builds])
    sender.jobs.clear()  # not embedded: what is found is full text's
    pattern = 'which port is the "dev server" on in the end -staging'
    found = grep(sclient, who, pattern, "hybrid")
    assert [plain(m["snippet"]) for m in found["matches"]] == [dev]


def test_dense_results_stay_inside_the_tenant_and_the_scope(
    sdb: Database, sclient: TestClient, sender: RecordingSender
) -> None:
    alice, bob = new_tenant(sdb, "alice"), new_tenant(sdb, "bob")
    post_messages(sclient, alice, "agent:main", [CAR])
    post_messages(sclient, bob, "agent:main", FILLER)
    post_messages(sclient, bob, "agent:other", ["The truck's engine would not crank today."])
    run_jobs(sdb, sender)
    found = grep(sclient, bob, "car would not start", "semantic", limit=50)
    assert CAR not in str(found)
    assert len(found["matches"]) == len(FILLER) + 1
    scoped = grep(
        sclient,
        bob,
        "car would not start",
        "semantic",
        all_conversations=False,
        session_key="agent:main",
    )
    assert {m["snippet"] for m in scoped["matches"]} == set(FILLER)
    later = grep(sclient, bob, "car would not start", "hybrid", since=utcnow().isoformat())
    assert later["matches"] == []


def test_semantic_modes_are_refused_where_semantic_is_off(
    db: Database, client: TestClient, tenant: IssuedKey, sender: RecordingSender
) -> None:
    post_messages(client, tenant, "agent:main", [CAR])
    assert not [j for j in sender.jobs if isinstance(j, EmbedConversation)]
    for mode in ("semantic", "hybrid"):
        response = client.post(
            "/v1/grep",
            json={"pattern": "car", "mode": mode, "all_conversations": True},
            headers=auth(tenant),
        )
        assert response.status_code == 400, response.text
        assert response.json()["error"]["code"] == "semantic_unavailable"


def test_the_backfill_embeds_what_a_lost_job_left(
    sdb: Database, sclient: TestClient, sender: RecordingSender
) -> None:
    who = new_tenant(sdb)
    post_messages(sclient, who, "agent:main", [CAR, *FILLER])
    sender.jobs.clear()  # the broker lost the embed job
    result = run_backfill(sdb.transaction, load_embedder(), 4, 60)
    assert result is not None
    assert result.embedded == 1 + len(FILLER)
    assert vectors(sdb) == 1 + len(FILLER)
    with sdb.read_session() as session:
        run = EmbeddingRunRepository(session).get(LEASE)
        assert run is not None
        assert run.finished_at is not None
        assert run.done == run.total == 1 + len(FILLER)


def test_a_model_change_re_embeds_everything_under_the_new_name(
    sdb: Database, sclient: TestClient, sender: RecordingSender
) -> None:
    who = new_tenant(sdb)
    post_messages(sclient, who, "agent:main", [CAR, *FILLER])
    run_jobs(sdb, sender)
    old = load_embedder()
    new = dataclasses.replace(old, model_name="minilm-next")
    result = run_backfill(sdb.transaction, new, 64, 60)
    assert result is not None
    assert (result.embedded, result.deleted) == (1 + len(FILLER), 1 + len(FILLER))
    assert vectors(sdb, "minilm-next") == vectors(sdb) == 1 + len(FILLER)


class _Held:
    """An embedder that blocks in ``embed`` until released: a backfill caught mid-run."""

    def __init__(self, real: Embedder) -> None:
        self.real, self.inside, self.release = real, threading.Event(), threading.Event()
        self.model_name, self.dimension = real.model_name, real.dimension

    def embed(self, texts: Sequence[str]) -> Any:
        self.inside.set()
        assert self.release.wait(60)
        return self.real.embed(texts)


def test_two_backfills_at_once_never_both_run(
    sdb: Database, sclient: TestClient, sender: RecordingSender
) -> None:
    who = new_tenant(sdb)
    post_messages(sclient, who, "agent:main", [CAR, *FILLER])
    sender.jobs.clear()
    held = _Held(load_embedder())
    outcome: list[Any] = []
    first = threading.Thread(
        target=lambda: outcome.append(run_backfill(sdb.transaction, held, 64, 60))  # type: ignore[arg-type]
    )
    first.start()
    assert held.inside.wait(60)
    # The first holds the lease mid-run: a second (beat, or `lcm reindex`) steps aside.
    assert run_backfill(sdb.transaction, load_embedder(), 64, 60) is None
    held.release.set()
    first.join(60)
    assert outcome
    assert outcome[0] is not None
    assert outcome[0].embedded == 1 + len(FILLER)
    assert vectors(sdb) == 1 + len(FILLER)


def test_the_lease_is_taken_by_exactly_one_of_two_racing_callers(sdb: Database) -> None:
    barrier = threading.Barrier(2)
    won: list[bool] = []

    def take(owner: str) -> None:
        with sdb.transaction() as session:
            barrier.wait(10)
            now = utcnow()
            won.append(
                EmbeddingRunRepository(session).take(
                    LEASE, owner, "m", now + timedelta(seconds=60), now
                )
            )

    threads = [threading.Thread(target=take, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(won) == [False, True]


def test_a_dense_scan_past_its_deadline_says_it_is_incomplete(
    sqlite_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = Database(sqlite_db.settings.model_copy(update={"semantic": True}), RecordingSender())
    who = new_tenant(db)
    client_iter = api_client(db.settings, db, RecordingSender())
    client = next(client_iter)
    cid = post_messages(client, who, "agent:main", [CAR, *FILLER])
    embed_conversation(db.transaction, load_embedder(), cid, 64)
    monkeypatch.setattr("lcm.semantic.search._SCAN_BATCH", 2)
    ask = DenseQuery(who.tenant_id, None, ("message",), None, None, "car", "raw", 10)
    with db.read_session() as session:
        cut = dense_search(session, load_embedder(), ask, time.monotonic() - 1)
        whole = dense_search(session, load_embedder(), ask, time.monotonic() + 60)
    assert cut.complete is False
    assert len(cut.hits) == 2
    assert whole.complete is True
    assert len(whole.hits) == 1 + len(FILLER)
    db.dispose()


def test_summaries_are_embedded_after_compaction_and_hits_expand_to_their_sources(
    sdb: Database, sclient: TestClient, sender: RecordingSender
) -> None:
    who = new_tenant(sdb)
    history = [CAR, *FILLER, *(f"{text} Again, day {i}." for i in range(2) for text in FILLER)]
    cid = post_messages(sclient, who, "agent:main", history)
    run_jobs(sdb, sender)
    compact(sdb, who.tenant_id, cid, fresh_tail=2)
    assert EmbedConversation(cid) in sender.jobs  # the pass asked for its summary's vector
    run_jobs(sdb, sender)
    with sdb.read_session() as session:
        targets = set(session.scalars(select(Embedding.target)))
    assert targets == {"message", "summary"}
    found = grep(
        sclient,
        who,
        "vehicle failed to turn over",
        "semantic",
        scope="summaries",
        expand_sources=100_000,
    )
    assert found["matches"]
    assert {m["type"] for m in found["matches"]} == {"summary"}
    sources = found["sources"]["messages"]
    assert any(CAR in str(m["message"]["content"]) for m in sources)
    plain = grep(sclient, who, "vehicle failed to turn over", "semantic", scope="summaries")
    assert plain["sources"] is None


def test_a_tenant_chooses_its_query_handling_and_a_bad_one_is_refused(
    sdb: Database, sclient: TestClient
) -> None:
    who = new_tenant(sdb)
    url = "/v1/tenant/settings"
    bad = sclient.patch(url, json={"semantic_query_handling": "stem"}, headers=auth(who))
    assert bad.status_code == 400, bad.text
    good = sclient.patch(url, json={"semantic_query_handling": "raw"}, headers=auth(who))
    assert good.status_code == 200, good.text
    shown = sclient.get(url, headers=auth(who)).json()
    assert "raw" in str(shown)


def test_the_expand_query_loop_can_grep_by_meaning(
    sdb: Database, sclient: TestClient, sender: RecordingSender
) -> None:
    from lcm.retrieval.agent_tools import GrantedTools
    from lcm.retrieval.expansion import grep_limits
    from lcm.retrieval.grants import issue_grant

    who = new_tenant(sdb)
    cid = post_messages(sclient, who, "agent:main", [CAR, *FILLER])
    run_jobs(sdb, sender)
    with sdb.transaction() as session:
        grant_id = issue_grant(session, who.tenant_id, [cid], 10_000, 60, utcnow()).id
    tools = GrantedTools(sdb.transaction, grant_id, who.tenant_id, grep_limits(sdb.settings), 4_000)
    outcome = tools.call("grep", {"pattern": "vehicle failed to turn over", "mode": "hybrid"})
    assert not outcome.is_error, outcome.text
    assert "battery was completely dead" in outcome.text.split("msg_")[1]

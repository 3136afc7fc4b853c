"""Hybrid grep's bounded full-text side: it ranks only the newest keyword
matches of each target, still finds a keyword-only hit, and says when the
bound left matches unranked (``complete: false`` and a note)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from lcm.db.engine import Database
from lcm.retrieval import semantic_grep
from lcm.retrieval.search_backlog import index_search_backlog
from tests.conftest import RecordingSender, new_tenant
from tests.integration.semantic_helpers import FILLER, grep, plain, post_messages, run_jobs


def test_hybrid_ranks_the_newest_keyword_matches_and_says_when_the_bound_cut(
    sdb: Database,
    sclient: TestClient,
    sender: RecordingSender,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(semantic_grep, "FULL_TEXT_CANDIDATES", 3)
    who = new_tenant(sdb)
    post_messages(sclient, who, "agent:main", FILLER)
    run_jobs(sdb, sender)
    old = [f"zanzibar rollout note {n}, an old one" for n in range(2)]
    new = [f"zanzibar rollout note {n}, a fresh one" for n in range(2, 5)]
    post_messages(sclient, who, "agent:main", old)
    post_messages(sclient, who, "agent:main", new)
    sender.jobs.clear()  # not embedded: only the full-text side can find these
    index_search_backlog(sdb.transaction)  # SQLite's search index (nothing on Postgres)

    found = grep(sclient, who, "zanzibar rollout", "hybrid", limit=20)
    keyword_hits = [plain(m["snippet"]) for m in found["matches"] if "zanzibar" in m["snippet"]]
    # The three newest of five matches were ranked, the two older ones were not.
    assert sorted(keyword_hits) == sorted(new), keyword_hits
    assert found["complete"] is False
    assert any("newest 3 keyword matches" in note for note in found["notes"]), found["notes"]

    # Exactly as many matches as the bound: nothing was cut, the grep is complete.
    only_new = grep(sclient, who, "fresh", "hybrid", limit=20)
    hits = [plain(m["snippet"]) for m in only_new["matches"] if "zanzibar" in m["snippet"]]
    assert sorted(hits) == sorted(new)
    assert only_new["complete"] is True
    assert only_new["notes"] == []


def test_a_keyword_only_hit_is_found_under_the_bound_in_a_narrow_scope(
    sdb: Database,
    sclient: TestClient,
    sender: RecordingSender,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Many matches elsewhere in the tenant do not crowd out a scope's own match."""
    monkeypatch.setattr(semantic_grep, "FULL_TEXT_CANDIDATES", 2)
    who = new_tenant(sdb)
    target = post_messages(sclient, who, "agent:one", [*FILLER, "the quokka migration failed"])
    post_messages(sclient, who, "agent:two", [f"quokka migration step {n}" for n in range(6)])
    sender.jobs.clear()
    index_search_backlog(sdb.transaction)

    scoped = grep(
        sclient,
        who,
        "why did the quokka migration fail",
        "hybrid",
        all_conversations=False,
        conversation_id=target,
    )
    snippets = [plain(m["snippet"]) for m in scoped["matches"]]
    assert "the quokka migration failed" in snippets[0], snippets
    assert scoped["complete"] is True
    tenant_wide = grep(sclient, who, "why did the quokka migration fail", "hybrid")
    assert tenant_wide["complete"] is False

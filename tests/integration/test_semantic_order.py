"""Hybrid grep embeds its query first, on the grep's thread, then runs the
full-text statements and the dense one on its session (embedding beside the
full-text statements was measured a loss on two cores: lcm/retrieval/
semantic_grep.py); the statement deadline and the model-not-loaded refusal."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event, text

from lcm.db.engine import Database
from lcm.retrieval.search_repository import SearchRepository
from lcm.semantic import embedder as embedder_module
from lcm.semantic.embedder import Embedder
from lcm.tenants.service import IssuedKey
from tests.conftest import RecordingSender, auth, new_tenant
from tests.integration.semantic_helpers import CAR, FILLER, grep, post_messages, run_jobs

QUESTION = "why would the car not start in the morning"
_SLOW_MODEL = 0.3  # seconds the model is made to take: longer than full text here


@pytest.fixture
def seeded(
    sdb: Database,
    sclient: TestClient,
    sender: RecordingSender,
) -> IssuedKey:
    who = new_tenant(sdb)
    post_messages(sclient, who, "agent:main", [CAR, *FILLER, "the morning standup moved"])
    run_jobs(sdb, sender)
    from lcm.retrieval.search_backlog import index_search_backlog

    index_search_backlog(sdb.transaction)
    return who


def _slow_model(monkeypatch: pytest.MonkeyPatch, record: list[tuple[str, float, float]]) -> None:
    """Every embedding takes ``_SLOW_MODEL`` longer (sleeping: the GIL is free, as
    onnxruntime leaves it) and records its thread and when it ran."""
    real = Embedder.embed

    def embed(self: Embedder, texts: Sequence[str]) -> Any:
        started = time.monotonic()
        time.sleep(_SLOW_MODEL)
        out = real(self, texts)
        record.append((threading.current_thread().name, started, time.monotonic()))
        return out

    monkeypatch.setattr(Embedder, "embed", embed)


def _statements(db: Database, seen: list[tuple[str, float]]) -> Any:
    def listen(_c: Any, _cur: Any, statement: str, *_rest: Any) -> None:
        if "content_tsv @@" in statement or "_fts MATCH" in statement:
            seen.append(("full text", time.monotonic()))
        elif "FROM embeddings" in statement:  # the nearest vectors, or SQLite's scan
            seen.append(("dense", time.monotonic()))

    event.listen(db.engine, "before_cursor_execute", listen)
    return lambda: event.remove(db.engine, "before_cursor_execute", listen)


def test_hybrid_embeds_on_the_grep_thread_before_any_statement_and_finds_the_same(
    sdb: Database,
    sclient: TestClient,
    seeded: IssuedKey,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = grep(sclient, seeded, QUESTION, "hybrid", sort="relevance", limit=5)
    embedded: list[tuple[str, float, float]] = []
    _slow_model(monkeypatch, embedded)
    seen: list[tuple[str, float]] = []
    stop = _statements(sdb, seen)
    try:
        after = grep(sclient, seeded, QUESTION, "hybrid", sort="relevance", limit=5)
    finally:
        stop()
    ((_thread, started, ended),) = embedded
    full_text = [at for kind, at in seen if kind == "full text"]
    dense = [at for kind, at in seen if kind == "dense"]
    assert full_text, seen
    assert dense, seen
    # The model ran first; full text after it, then the dense statement.
    assert ended <= min(full_text), (started, full_text, ended)
    assert max(full_text) <= min(dense)
    # The same hits in the same fused order, and the same flags.
    assert [m["snippet"] for m in after["matches"]] == [m["snippet"] for m in before["matches"]]
    assert CAR.split(",")[0] in after["matches"][0]["snippet"].replace("«", "").replace("»", "")
    assert after["complete"] is before["complete"] is True
    assert after["notes"] == before["notes"]


def test_semantic_mode_embeds_before_its_one_statement(
    sdb: Database,
    sclient: TestClient,
    seeded: IssuedKey,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No full-text side: the model, then the nearest vectors."""
    embedded: list[tuple[str, float, float]] = []
    _slow_model(monkeypatch, embedded)
    seen: list[tuple[str, float]] = []
    stop = _statements(sdb, seen)
    try:
        found = grep(sclient, seeded, QUESTION, "semantic", limit=3)
    finally:
        stop()
    assert CAR[:20] in found["matches"][0]["snippet"].replace("«", "").replace("»", "")
    ((_thread, _started, ended),) = embedded
    assert [kind for kind, _ in seen if kind == "full text"] == []
    dense = [at for kind, at in seen if kind == "dense"]
    assert dense, seen
    assert ended <= min(dense)


def test_a_full_text_statement_past_the_deadline_still_refuses_the_grep(
    pg_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The statement deadline covers hybrid's full-text statements: the grep is
    refused (search_timeout), and the next grep runs normally."""
    from tests.conftest import api_client

    limited = {"semantic": True, "statement_timeout_ms": 500}
    db = Database(pg_db.settings.model_copy(update=limited), RecordingSender())
    client = next(api_client(db.settings, db, RecordingSender()))
    who = new_tenant(db)
    post_messages(client, who, "agent:main", [CAR, *FILLER])
    embedded: list[tuple[str, float, float]] = []
    _slow_model(monkeypatch, embedded)
    real = SearchRepository.newest_matches

    def slow(self: SearchRepository, *args: Any) -> list[int | str]:
        self.session.execute(text("SELECT pg_sleep(3)"))  # past the grep's deadline
        return real(self, *args)

    monkeypatch.setattr(SearchRepository, "newest_matches", slow)
    body = {"pattern": QUESTION, "mode": "hybrid", "all_conversations": True, "scope": "messages"}
    started = time.monotonic()
    response = client.post("/v1/grep", json=body, headers=auth(who))
    waited = time.monotonic() - started
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "search_timeout"
    assert waited < 2.5, waited  # cancelled at the deadline, not after the 3 s sleep
    monkeypatch.setattr(SearchRepository, "newest_matches", real)
    again = client.post("/v1/grep", json=body, headers=auth(who))
    assert again.status_code == 200, again.text
    assert CAR[:20] in again.json()["matches"][0]["snippet"].replace("«", "").replace("»", "")
    db.dispose()


def test_a_model_that_cannot_load_refuses_hybrid_before_any_statement(
    sdb: Database,
    sclient: TestClient,
    seeded: IssuedKey,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The model is loaded (or refused) first: a refusal runs no statement."""

    def broken() -> Embedder:
        raise embedder_module.SemanticUnavailable("the model file is missing")

    monkeypatch.setattr(embedder_module, "_loaded", None)
    monkeypatch.setattr(embedder_module, "_load", broken)
    seen: list[tuple[str, float]] = []
    stop = _statements(sdb, seen)
    try:
        response = sclient.post(
            "/v1/grep",
            json={"pattern": QUESTION, "mode": "hybrid", "all_conversations": True},
            headers=auth(seeded),
        )
    finally:
        stop()
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "semantic_unavailable"
    assert seen == []


def test_hybrid_fuses_the_dense_sides_limit_with_three_times_as_many_full_text_rows(
    sclient: TestClient,
    seeded: IssuedKey,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The dense side is asked for the grep's ``limit`` texts (a deeper walk of
    the graph costs far more than its rows), full text for three times as many."""
    from lcm.retrieval import semantic_grep as module

    asked: dict[str, list[int]] = {"dense": [], "full text": []}
    real_vector, real_full_text = module.search_vector, SearchRepository.full_text

    def vector(session: Any, model: str, v: Any, query: Any, *rest: Any) -> Any:
        asked["dense"].append(query.limit)
        return real_vector(session, model, v, query, *rest)

    def full_text(self: SearchRepository, *args: Any, **kwargs: Any) -> Any:
        asked["full text"].append(args[4])  # target, bounds, query, sort, limit
        return real_full_text(self, *args, **kwargs)

    monkeypatch.setattr(module, "search_vector", vector)
    monkeypatch.setattr(SearchRepository, "full_text", full_text)
    found = grep(sclient, seeded, QUESTION, "hybrid", sort="relevance", limit=5)
    assert CAR.split(",")[0] in found["matches"][0]["snippet"].replace("«", "").replace("»", "")
    assert asked == {"dense": [5], "full text": [15]}
    asked["dense"].clear()
    grep(sclient, seeded, QUESTION, "semantic", limit=5)
    assert asked["dense"] == [5]

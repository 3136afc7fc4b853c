"""The dense statement reads its rows from a cursor and stops once it holds enough
different texts: a walk of the HNSW graph goes no further than the answer needs,
and the hits are still each text's best chunk, as scoring every vector finds them."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from sqlalchemy import event, text

from lcm.db.engine import Database
from lcm.db.models import Conversation, utcnow
from lcm.semantic import nearest_repository
from lcm.semantic.embedder import MODEL_NAME
from lcm.semantic.repository import EmbeddingRepository
from lcm.semantic.search import DenseQuery, search_vector
from tests.conftest import RecordingSender, new_tenant

pytestmark = pytest.mark.postgres


def _unit(vector: list[float]) -> list[float]:
    norm = sum(x * x for x in vector) ** 0.5
    return [x / norm for x in vector]


def _random(rng: random.Random) -> list[float]:
    return _unit([rng.gauss(0, 1) for _ in range(384)])


def _row(tenant_id: str, cid: int, source: str, chunk: int, vector: list[float]) -> dict:
    now = utcnow()
    return {
        "tenant_id": tenant_id,
        "conversation_id": cid,
        "target": "message",
        "source": source,
        "message_id": None,
        "chunk": chunk,
        "model": MODEL_NAME,
        "dimension": 384,
        "at": now,
        "created_at": now,
        "vector": None,
        "embedding": "[" + ",".join(f"{x:.6g}" for x in vector) + "]",
    }


@pytest.fixture
def chunked(pg_db: Database) -> Iterator[tuple[Database, str, int, int]]:
    """One tenant: a conversation of 300 one-chunk texts, and one of 100 texts in
    3 chunks each (each text's chunks close to one another, so they crowd the
    nearest rows together)."""
    db = Database(pg_db.settings.model_copy(update={"semantic": True}), RecordingSender())
    rng = random.Random(11)
    tenant_id = new_tenant(db, "walk").tenant_id
    with db.transaction() as session:
        cids = []
        for key in ("single", "chunked"):
            conversation = Conversation(tenant_id=tenant_id, session_key=key, session_id=key)
            session.add(conversation)
            session.flush()
            cids.append(conversation.id)
        rows = [_row(tenant_id, cids[0], f"msg_{n}", 0, _random(rng)) for n in range(300)]
        for n in range(100):
            centre = _random(rng)
            for chunk in range(3):
                near = _unit([c + rng.gauss(0, 0.01) for c in centre])
                rows.append(_row(tenant_id, cids[1], f"msg_{1000 + n}", chunk, near))
        EmbeddingRepository(session).store(rows)
    with db.engine.begin() as conn:
        conn.execute(text("ANALYZE embeddings"))
    yield db, tenant_id, cids[0], cids[1]
    db.dispose()


def _walked(db: Database, tenant_id: str, cid: int, want: int) -> tuple[list[Any], Any]:
    """The rows ``nearest`` returned walking the graph, and its statement's parameters."""
    seen: list[Any] = []

    def listen(_c: Any, _cur: Any, statement: str, params: Any, *_rest: Any) -> None:
        if "FROM embeddings" in statement and "ORDER BY" in statement:
            seen.append(params)

    event.listen(db.engine, "before_cursor_execute", listen)
    try:
        with db.read_session() as session:
            # A search list wider than the table: the walk is exhaustive, so its
            # order is the exact one and the test does not hang on recall.
            session.execute(text("SELECT set_config('hnsw.ef_search', '1000', true)"))
            rows = EmbeddingRepository(session).nearest(
                tenant_id, MODEL_NAME, [cid], ("message",), None, None, _query(), want
            )
    finally:
        event.remove(db.engine, "before_cursor_execute", listen)
    (params,) = seen
    return rows, params


def _query() -> list[float]:
    return _random(random.Random(99))


def test_the_walk_stops_once_enough_different_texts_are_in(
    chunked: tuple[Database, str, int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The statement may read 3 rows a wanted text (chunks), but with one-chunk
    texts the first ``want`` rows are enough and no more are read; with texts in
    chunks, reading goes on until ``want`` different texts are in."""
    db, tenant_id, single, several = chunked
    monkeypatch.setattr(nearest_repository, "EXACT_SEARCH_BELOW", 0)  # always the walk

    rows, params = _walked(db, tenant_id, single, 20)
    assert 60 in params.values(), params  # the bound: 3 rows a wanted text
    assert len(rows) == 20
    assert len({row[1] for row in rows}) == 20

    rows, _params = _walked(db, tenant_id, several, 20)
    assert len({row[1] for row in rows}) >= 20
    assert 20 < len(rows) <= 60


def _dense(db: Database, tenant_id: str, cid: int) -> list[tuple[str, float]]:
    query = DenseQuery(tenant_id, (cid,), ("message",), None, None, "q", "raw", 20)
    with db.read_session() as session:
        session.execute(text("SELECT set_config('hnsw.ef_search', '1000', true)"))
        found = search_vector(
            session, MODEL_NAME, np.array(_query()), query, time.monotonic() + 30, "q"
        )
    return [(hit.source, hit.similarity) for hit in found.hits]


def test_dense_hits_are_each_texts_best_chunk_walked_or_scored_exactly(
    chunked: tuple[Database, str, int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same 20 texts, in the same order, as the best chunk of every text
    scored in SQL, whether the scope is sorted exactly or the graph is walked."""
    db, tenant_id, _single, several = chunked
    with db.read_session() as session:
        expected = session.execute(
            text(
                "SELECT source, max(-(embedding <#> CAST(:q AS vector))) AS best "
                "FROM embeddings WHERE conversation_id = :cid "
                "GROUP BY source ORDER BY best DESC, source LIMIT 20"
            ),
            {"q": str(_query()), "cid": several},
        ).all()
    exact = _dense(db, tenant_id, several)
    monkeypatch.setattr(nearest_repository, "EXACT_SEARCH_BELOW", 0)
    walked = _dense(db, tenant_id, several)
    assert [s for s, _ in exact] == [row[0] for row in expected]
    assert [s for s, _ in walked] == [row[0] for row in expected]
    assert [sim for _, sim in exact] == pytest.approx([row[1] for row in expected], abs=1e-5)


def test_a_dense_read_past_the_deadline_refuses_the_grep(
    pg_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A walk's cursor is declared, then its rows are read (FETCH): a read past
    the grep's statement deadline is cancelled there and the grep refused as
    ``search_timeout`` (400), not a 500; the next grep runs normally."""
    from tests.conftest import api_client, auth
    from tests.integration.semantic_helpers import CAR, FILLER, post_messages, run_jobs

    limited = {"semantic": True, "statement_timeout_ms": 500}
    sender = RecordingSender()
    db = Database(pg_db.settings.model_copy(update=limited), sender)
    client = next(api_client(db.settings, db, sender))
    who = new_tenant(db)
    post_messages(client, who, "agent:main", [CAR, *FILLER])
    run_jobs(db, sender)  # vectors to read: the slow condition is tested row by row
    real = EmbeddingRepository._bounds

    def slow(self: EmbeddingRepository, *args: Any) -> list[Any]:
        # Volatile, so tested on each row read (FETCH), never when declaring.
        return [*real(self, *args), text("pg_sleep(3) IS NOT NULL")]

    monkeypatch.setattr(EmbeddingRepository, "_bounds", slow)
    monkeypatch.setattr(nearest_repository, "EXACT_SEARCH_BELOW", 0)  # the walk: a cursor
    body: dict[str, Any] = {"pattern": "why would the car not start", "mode": "semantic"}
    body |= {"scope": "messages", "all_conversations": True}
    started = time.monotonic()
    response = client.post("/v1/grep", json=body, headers=auth(who))
    waited = time.monotonic() - started
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "search_timeout"
    assert waited < 2.5, waited  # cancelled at the deadline, not after the 3 s sleep
    monkeypatch.setattr(EmbeddingRepository, "_bounds", real)
    again = client.post("/v1/grep", json=body, headers=auth(who))
    assert again.status_code == 200, again.text
    db.dispose()

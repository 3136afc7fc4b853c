"""The embed job's throughput guards on both databases: one job at a time per
conversation (the others leave and the holder looks again), and walks that
resume from a cursor instead of re-reading every text before it."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from lcm.db.engine import Database
from lcm.db.models import Embedding, EmbeddingRun
from lcm.semantic.backfill import embed_conversation, run_backfill
from lcm.semantic.embedder import Embedder, load_embedder
from lcm.semantic.pending import Cursor
from lcm.semantic.repository import EmbeddingRepository
from tests.conftest import new_tenant
from tests.integration.semantic_helpers import CAR, FILLER, post_messages, vectors


class _Counting:
    """The real embedder, counting the texts it embeds; ``hold`` stops the first call."""

    def __init__(self, real: Embedder, hold: bool = False) -> None:
        self.real, self.texts = real, 0
        self.model_name, self.dimension = real.model_name, real.dimension
        self.inside, self.release = threading.Event(), threading.Event()
        if not hold:
            self.release.set()

    def embed(self, texts: Sequence[str]) -> Any:
        self.inside.set()
        assert self.release.wait(60)
        self.texts += len(texts)
        return self.real.embed(texts)


def test_a_second_job_for_a_conversation_leaves_and_the_holder_embeds_what_it_was_sent_for(
    sdb: Database, sclient: TestClient
) -> None:
    who = new_tenant(sdb)
    cid = post_messages(sclient, who, "agent:main", [CAR, *FILLER])
    held = _Counting(load_embedder(), hold=True)
    outcome: list[int] = []
    first = threading.Thread(
        target=lambda: outcome.append(embed_conversation(sdb.transaction, held, cid, 64))  # type: ignore[arg-type]
    )
    first.start()
    assert held.inside.wait(60)
    # The first job is mid-embedding: a second ingest commits and its job runs now.
    post_messages(sclient, who, "agent:main", ["The dentist moved my appointment to May."])
    second = _Counting(load_embedder())
    assert embed_conversation(sdb.transaction, second, cid, 64) == 0  # type: ignore[arg-type]
    assert second.texts == 0  # it embedded nothing twice
    held.release.set()
    first.join(60)
    # The holder looked again after letting go and took the new message too.
    assert outcome == [2 + len(FILLER)]
    assert held.texts == 2 + len(FILLER)
    assert vectors(sdb) == 2 + len(FILLER)
    with sdb.read_session() as session:  # the per-conversation lease left no row behind
        assert session.scalar(select(func.count()).select_from(EmbeddingRun)) == 0


def test_concurrent_jobs_for_one_conversation_embed_each_text_once(
    sdb: Database, sclient: TestClient
) -> None:
    who = new_tenant(sdb)
    cid = post_messages(sclient, who, "agent:main", [CAR, *FILLER])
    counting = _Counting(load_embedder())
    barrier = threading.Barrier(4)
    results: list[int] = []

    def job() -> None:
        barrier.wait(30)
        results.append(embed_conversation(sdb.transaction, counting, cid, 2))  # type: ignore[arg-type]

    threads = [threading.Thread(target=job) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert sum(results) == counting.texts == 1 + len(FILLER)
    assert vectors(sdb) == 1 + len(FILLER)


def test_pending_resumes_past_its_cursor(sdb: Database, sclient: TestClient) -> None:
    who = new_tenant(sdb)
    post_messages(sclient, who, "agent:main", [CAR, *FILLER])
    model = load_embedder().model_name
    with sdb.read_session() as session:
        repo = EmbeddingRepository(session)
        first = repo.pending(model, None, 4)
        rest = repo.pending(model, None, 4, Cursor().past(first))
    ids = [p.message_id or 0 for p in first + rest]
    assert len(first) == 4
    assert len(ids) == len(set(ids)) == 1 + len(FILLER)
    assert ids == sorted(ids)


def test_the_backfill_reads_each_waiting_text_once_even_when_a_write_keeps_nothing(
    sdb: Database, sclient: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch whose rows are not kept (here: a store that writes nothing) is not
    read again by the same run: the walk moves past it and the run ends."""
    who = new_tenant(sdb)
    post_messages(sclient, who, "agent:main", [CAR, *FILLER])
    counting = _Counting(load_embedder())
    monkeypatch.setattr(EmbeddingRepository, "store", lambda self, rows: None)
    result = run_backfill(sdb.transaction, counting, 2, 60)  # type: ignore[arg-type]
    assert result is not None
    assert counting.texts == 1 + len(FILLER)
    with sdb.read_session() as session:
        assert session.scalar(select(func.count()).select_from(Embedding)) == 0


def test_the_backfill_leaves_a_conversation_its_embed_job_holds(
    sdb: Database, sclient: TestClient
) -> None:
    who = new_tenant(sdb)
    busy = post_messages(sclient, who, "agent:main", [CAR, *FILLER])
    post_messages(sclient, who, "agent:other", ["The dentist moved my appointment to May."])
    held = _Counting(load_embedder(), hold=True)
    outcome: list[int] = []
    job = threading.Thread(
        target=lambda: outcome.append(embed_conversation(sdb.transaction, held, busy, 64))  # type: ignore[arg-type]
    )
    job.start()
    assert held.inside.wait(60)
    # Beat's backfill runs while the job embeds: it takes the other conversation only.
    backfill = _Counting(load_embedder())
    result = run_backfill(sdb.transaction, backfill, 64, 60)  # type: ignore[arg-type]
    assert result is not None
    assert (result.embedded, backfill.texts) == (1, 1)
    held.release.set()
    job.join(60)
    assert outcome == [1 + len(FILLER)]
    assert vectors(sdb) == 2 + len(FILLER)

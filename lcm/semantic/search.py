"""Dense search: the texts nearest in meaning to a query, within a tenant's bounds.

Postgres with pgvector asks the HNSW index (``embedding <#> query``, with
iterative scans so a scope filter does not starve it). Elsewhere (SQLite,
Postgres without pgvector) the bounded rows are scanned exactly: vectors are
read in batches and scored with one matrix product each, under the grep's
deadline; a scan cut short reports ``complete=False``, as regex grep does.
A text embedded in chunks scores as its best chunk.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from lcm.semantic.embedder import Embedder
from lcm.semantic.query_text import dense_query, frequent_words
from lcm.semantic.repository import EmbeddingRepository, VectorRow
from lcm.semantic_settings import QueryHandling

_SCAN_BATCH = 4_096
_SAMPLE_TEXTS = 2_000
_FREQUENT_TTL_SECONDS = 600.0
# tenant -> (when computed, its frequent words): a sample costs one indexed
# read of 2,000 rows, too much for every query and stable for minutes.
_frequent_cache: dict[str, tuple[float, frozenset[str]]] = {}


@dataclass(frozen=True, slots=True)
class DenseQuery:
    """A dense search: the tenant's bounds, the text and how the query is handled."""

    tenant_id: str
    conversation_ids: tuple[int, ...] | None
    targets: tuple[str, ...]
    since: datetime | None
    before: datetime | None
    text: str
    handling: QueryHandling
    limit: int


@dataclass(frozen=True, slots=True)
class DenseHit:
    target: str
    source: str  # msg_<id> or a summary id
    conversation_id: int
    similarity: float


@dataclass(frozen=True, slots=True)
class DenseResult:
    hits: list[DenseHit]
    complete: bool
    query_text: str  # what was embedded


def dense_search(
    session: Session, embedder: Embedder, query: DenseQuery, deadline: float
) -> DenseResult:
    """The ``query.limit`` nearest texts, best first; ``deadline`` is a ``time.monotonic()``."""
    text = dense_text(session, query)
    vector = embedder.embed([text])[0]
    return search_vector(session, embedder.model_name, vector, query, deadline, text)


def dense_text(session: Session, query: DenseQuery) -> str:
    """What is embedded of ``query.text`` under its handling (the tenant's frequent words)."""
    repo = EmbeddingRepository(session)
    return dense_query(query.text, query.handling, lambda: _frequent(repo, query.tenant_id))


def search_vector(
    session: Session, model: str, vector: Any, query: DenseQuery, deadline: float, text: str
) -> DenseResult:
    """The ``query.limit`` texts nearest ``vector`` (``text`` embedded by ``model``)."""
    repo = EmbeddingRepository(session)
    bounds = (
        query.tenant_id,
        model,
        query.conversation_ids,
        query.targets,
        query.since,
        query.before,
    )
    if repo.uses_pgvector:
        # Chunks of one text can fill several places: rows are read until
        # ``limit`` different texts are in; each text keeps its best chunk.
        rows = repo.nearest(*bounds, vector.tolist(), query.limit)
        hits = _best_per_source((t, s, c, sim) for t, s, c, sim in rows)
        return DenseResult(hits[: query.limit], True, text)
    return _scan(repo.scan(*bounds), vector, query.limit, deadline, text)


def _scan(rows: Any, vector: Any, limit: int, deadline: float, text: str) -> DenseResult:
    import numpy as np  # the semantic extra: only reached with it installed

    best: dict[str, tuple[str, str, int, float]] = {}
    batch: list[VectorRow] = []
    complete = True

    def score(batch: Sequence[VectorRow]) -> None:
        matrix = np.frombuffer(b"".join(r.vector for r in batch), dtype="<f4")
        sims = matrix.reshape(len(batch), -1) @ vector
        for row, sim in zip(batch, sims.tolist(), strict=True):
            held = best.get(row.source)
            if held is None or sim > held[3]:
                best[row.source] = (row.target, row.source, row.conversation_id, sim)

    for row in rows:
        batch.append(row)
        if len(batch) >= _SCAN_BATCH:
            score(batch)
            batch = []
            if time.monotonic() > deadline:
                complete = False
                break
    if batch:
        score(batch)
    hits = _best_per_source(best.values())
    return DenseResult(hits[:limit], complete, text)


def _best_per_source(rows: Any) -> list[DenseHit]:
    best: dict[str, DenseHit] = {}
    for target, source, conversation_id, similarity in rows:
        held = best.get(source)
        if held is None or similarity > held.similarity:
            best[source] = DenseHit(target, source, int(conversation_id), float(similarity))
    return sorted(best.values(), key=lambda h: (-h.similarity, h.source))


def _frequent(repo: EmbeddingRepository, tenant_id: str) -> frozenset[str]:
    now = time.monotonic()
    cached = _frequent_cache.get(tenant_id)
    if cached is not None and now - cached[0] < _FREQUENT_TTL_SECONDS:
        return cached[1]
    words = frequent_words(repo.recent_texts(tenant_id, _SAMPLE_TEXTS))
    _frequent_cache[tenant_id] = (now, words)
    return words

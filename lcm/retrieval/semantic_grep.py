"""grep's ``semantic`` and ``hybrid`` modes: recall by meaning, fused with full text.

``semantic`` ranks by the dense side alone (cosine similarity of the query's
vector to each text's best chunk; :mod:`lcm.semantic.search`). ``hybrid``
fuses the full-text ranking and the dense ranking by reciprocal rank
(``sum 1 / (RRF_K + rank)``, k = 60, the usual constant): a text either side
ranks high comes first, without comparing a bm25 score to a cosine. The
dense side brings the grep's ``limit`` nearest texts to the fusion, the
full-text side up to three times as many (``text_pool``). Its
full-text side reads the pattern's keywords, any of them matching
(:func:`~lcm.retrieval.prompt_terms.keywords_query`): a question's words
ANDed would rarely all be in one message. It ranks only the newest
``FULL_TEXT_CANDIDATES`` matches of each target (``complete: false`` when
there were more). A message not embedded yet (its
job has not run) is still found by the full-text side. Both modes keep grep's
bounds (tenant, scope, since/before, in-context), its statement deadline and
its ``complete`` flag.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from sqlalchemy.exc import OperationalError

from lcm.errors import InvalidInput, SemanticUnavailable
from lcm.retrieval.prompt_terms import keywords_query
from lcm.retrieval.query import TextQuery, highlight_pattern, parse_text_query
from lcm.retrieval.ranking_sql import MIN_EXPONENT, Target
from lcm.retrieval.search_repository import SearchRepository, is_timeout, refuse_timeout
from lcm.retrieval.search_rows import Bounds, SearchRow, Sort
from lcm.semantic import (
    DenseQuery,
    DenseResult,
    Embedder,
    dense_text,
    load_embedder,
    search_vector,
)
from lcm.semantic_settings import QueryHandling

RRF_K = 60
_MAX_POOL = 200  # the most candidates the full-text side brings to the fusion
# Hybrid's full-text side ranks at most this many matches per target, the
# newest: fusion reads its top ``_MAX_POOL`` ranks, and ranking every match of
# a question's ORed keywords over a large tenant took seconds. A grep whose
# matches the bound cut reports ``complete: false`` with a note.
FULL_TEXT_CANDIDATES = 1_000
Spans = list[tuple[int, int]]


@dataclass(frozen=True, slots=True)
class SemanticOptions:
    """The deployment's switch and the tenant's query handling, as grep receives them."""

    enabled: bool = False
    query_handling: QueryHandling = "strip_roles"
    # The tenant's semantic_min_similarity: what SemanticAsk.floored uses.
    min_similarity: float = 0.0


@dataclass(frozen=True, slots=True)
class SemanticFound:
    found: list[tuple[SearchRow, Spans]]
    complete: bool = True
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class SemanticAsk:
    """One semantic or hybrid grep: what to find and how to rank it."""

    pattern: str
    mode: Literal["semantic", "hybrid"]
    targets: tuple[Target, ...]
    sort: Sort
    limit: int
    timeout_ms: int
    half_life_hours: float
    # Dense hits below this similarity are dropped before ranking (expand-query's
    # conversation ranking); grep itself keeps 0: its nearest texts, always.
    min_similarity: float = 0.0


def semantic_grep(
    repo: SearchRepository,
    bounds: Bounds,
    ask: SemanticAsk,
    options: SemanticOptions,
    now: datetime,
) -> SemanticFound:
    """Run a semantic or hybrid grep; :class:`SemanticUnavailable` where it is off."""
    if not options.enabled:
        raise SemanticUnavailable(
            f'"mode": "{ask.mode}" needs semantic recall, which this deployment has off '
            "(LCM_SEMANTIC=on and the semantic extra turn it on)"
        )
    embedder = load_embedder()
    text_query, notes = _text_query(ask)
    pool = text_pool(ask.limit)
    dense_ask = DenseQuery(
        bounds.tenant_id,
        bounds.conversation_ids,
        ask.targets,
        bounds.since,
        bounds.before,
        ask.pattern,
        options.query_handling,
        ask.limit,
    )
    try:
        with repo.statement_deadline(ask.timeout_ms):
            dense, full_text, cut = _sides(
                repo, embedder, bounds, ask, dense_ask, text_query, pool, now
            )
            if ask.min_similarity > 0:
                kept = [h for h in dense.hits if h.similarity >= ask.min_similarity]
                dense = dataclasses.replace(dense, hits=kept)
            full_text.sort(key=lambda r: (r.score or 0.0, r.at), reverse=True)
            rows = _dense_rows(repo, bounds, dense, full_text[:pool])
    except OperationalError as exc:
        if is_timeout(exc):
            raise refuse_timeout(ask.timeout_ms) from exc
        raise
    ranked = _rank(ask, dense, full_text[:pool], rows, now)
    if not dense.complete:
        notes.append("time budget reached: the dense side scored part of the stored vectors")
    if cut:
        notes.append(
            f"full text ranked the newest {FULL_TEXT_CANDIDATES:,} keyword matches of each "
            "target, not all of them: narrow the scope or use full_text mode for the rest"
        )
    spans = highlight_pattern(text_query) if text_query is not None else None
    found = [
        (row, [m.span() for m in spans.finditer(row.content)][:20] if spans else [])
        for row in ranked
    ]
    return SemanticFound(found, dense.complete and not cut, notes)


def text_pool(limit: int) -> int:
    """How many full-text candidates hybrid fuses with the dense side's ``limit``.

    The two sides are not equally cheap to deepen. Full text ranks its
    bounded candidates either way, so three times the limit costs little. A
    dense walk of the HNSW graph under a selective filter costs far more
    than its rows: at 1M vectors a small tenant's (5%) nearest 20 messages
    took 8.5 ms, 40 took 25 ms, 60 took 35-40 ms (p50, quiet host). Fusing
    the dense side's top ``limit`` rather than three times as many left
    recall as it was on the recall set (recall@10 0.769 against 0.774 on
    201 paraphrases, MRR 0.432 against 0.406; docs/performance.md): a text
    the dense side ranks past ``limit`` needs full text's vote to reach the
    top ``limit``, and full text still brings it, on its own rank.
    """
    return min(_MAX_POOL, limit * 3)


def _sides(
    repo: SearchRepository,
    embedder: Embedder,
    bounds: Bounds,
    ask: SemanticAsk,
    dense_ask: DenseQuery,
    text_query: TextQuery | None,
    pool: int,
    now: datetime,
) -> tuple[DenseResult, list[SearchRow], bool]:
    """The dense side's hits, the full-text side's rows, and whether its bound cut some.

    The query is embedded first, on this thread; then hybrid's full-text
    statements, then the nearest vectors, all on the grep's session under its
    deadline. Embedding beside the full-text statements (in another thread)
    was built and measured: on two cores it was as fast or slower in 17 of 18
    scopes, up to twice as slow where Postgres had the most to do, the
    model's threads competing with the database for the cores
    (docs/performance.md, Semantic at scale).
    """
    deadline = time.monotonic() + ask.timeout_ms / 1000
    query_text = dense_text(repo.session, dense_ask)  # the tenant's frequent words, kept
    vector = embedder.embed([query_text])[0]
    full_text: list[SearchRow] = []
    cut = False
    if ask.mode == "hybrid" and text_query is not None:
        full_text, cut = _full_text_side(repo, bounds, text_query, ask.targets, pool, now)
    model = embedder.model_name
    found = search_vector(repo.session, model, vector, dense_ask, deadline, query_text)
    return found, full_text, cut


def _full_text_side(
    repo: SearchRepository,
    bounds: Bounds,
    text_query: TextQuery,
    targets: tuple[Target, ...],
    pool: int,
    now: datetime,
) -> tuple[list[SearchRow], bool]:
    """Hybrid's full-text ranking over the newest matches; True when the bound cut some."""
    rows: list[SearchRow] = []
    cut = False
    for target in targets:
        among = repo.newest_matches(target, bounds, text_query, FULL_TEXT_CANDIDATES + 1)
        cut = cut or len(among) > FULL_TEXT_CANDIDATES
        rows += repo.full_text(
            target,
            bounds,
            text_query,
            "relevance",
            pool,
            now,
            3600.0,
            among=among[:FULL_TEXT_CANDIDATES],
        )
    return rows, cut


def _text_query(ask: SemanticAsk) -> tuple[TextQuery | None, list[str]]:
    """The pattern as full text: hybrid reads its keywords, any of them matching."""
    try:
        query = parse_text_query(ask.pattern)
        return (keywords_query(query) if ask.mode == "hybrid" else query), []
    except InvalidInput as exc:
        if ask.mode == "semantic":
            return None, []  # only snippet highlights are lost
        return None, [f"full text could not read the query ({exc.message}); dense side only"]


Key = tuple[str, str]


def _key(row: SearchRow) -> Key:
    return (row.target, str(row.id))


def _dense_rows(
    repo: SearchRepository, bounds: Bounds, dense: DenseResult, full_text: list[SearchRow]
) -> dict[Key, SearchRow]:
    """The rows of every candidate; a dense hit outside ``bounds`` (in-context) is dropped."""
    rows = {_key(r): r for r in full_text}
    wanted: dict[Target, list[int | str]] = defaultdict(list)
    for hit in dense.hits:
        target: Target = "message" if hit.target == "message" else "summary"
        ident: int | str = int(hit.source[4:]) if target == "message" else hit.source
        if (target, str(ident)) not in rows:
            wanted[target].append(ident)
    for target, ids in wanted.items():
        for row in repo.rows_by_ids(target, bounds, ids):
            rows[_key(row)] = row
    return rows


def _rank(
    ask: SemanticAsk,
    dense: DenseResult,
    full_text: list[SearchRow],
    rows: dict[Key, SearchRow],
    now: datetime,
) -> list[SearchRow]:
    scores: dict[Key, float] = defaultdict(float)
    dense_keys = [
        (("message", h.source[4:]) if h.target == "message" else ("summary", h.source), h)
        for h in dense.hits
    ]
    if ask.mode == "semantic":
        for key, hit in dense_keys:
            scores[key] = hit.similarity
    else:
        for rank, row in enumerate(full_text, 1):
            scores[_key(row)] += 1.0 / (RRF_K + rank)
        for rank, (key, _hit) in enumerate(dense_keys, 1):
            scores[key] += 1.0 / (RRF_K + rank)
    half_life = ask.half_life_hours * 3600
    out = []
    for key, score in scores.items():
        held = rows.get(key)
        if held is None:
            continue
        if ask.sort == "hybrid":
            age = max((now - held.at).total_seconds(), 0.0)
            score *= math.exp(max(-math.log(2) * age / half_life, MIN_EXPONENT))
        out.append(dataclasses.replace(held, score=score))
    out.sort(key=lambda r: (r.score or 0.0, r.at, str(r.id)), reverse=True)
    out = out[: ask.limit]
    if ask.sort == "recency":
        out.sort(key=lambda r: (r.at, str(r.id)), reverse=True)
    return out

"""grep: find messages and summaries by regex or full text, within bounds.

Regex mode streams candidate rows newest first (prefiltered by the trigram
index when the pattern has a literal) and runs RE2 on them in Python, under
a wall-clock budget: a pattern with no literal over a huge scope returns what
it found in time with ``complete: false`` rather than holding a connection.
Full-text mode ranks inside the database. Every query runs under the
statement timeout.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from lcm.db.models import utcnow
from lcm.errors import InvalidInput
from lcm.retrieval.query import (
    RegexQuery,
    TextQuery,
    compile_regex,
    highlight_pattern,
    parse_text_query,
)
from lcm.retrieval.ranking_sql import MIN_EXPONENT, Target
from lcm.retrieval.search_repository import SearchRepository, is_timeout, refuse_timeout
from lcm.retrieval.search_rows import Bounds, SearchRow, Sort
from lcm.retrieval.semantic_grep import SemanticAsk, SemanticOptions, semantic_grep
from lcm.retrieval.snippets import build_snippet
from lcm.secrets import SecretSpan, content_masks, detect, mask_ranges

Mode = Literal["regex", "full_text", "semantic", "hybrid"]
Scope = Literal["messages", "summaries", "both", "files"]
MAX_LIMIT = 200
_TARGETS: dict[Scope, tuple[Target, ...]] = {
    "messages": ("message",),
    "summaries": ("summary",),
    "both": ("message", "summary"),
    "files": (),  # large files: lcm.retrieval.file_grep, not the database indexes
}


@dataclass(frozen=True, slots=True)
class GrepQuery:
    pattern: str
    mode: Mode = "regex"
    scope: Scope = "both"
    sort: Sort = "recency"
    limit: int = 50
    file_ids: tuple[str, ...] = ()  # files scope: only these files (empty: every file)


@dataclass(frozen=True, slots=True)
class GrepMatch:
    type: Target | Literal["file"]
    id: int | str
    ref: str  # "msg_<id>" or the summary id: what expand-query answers cite
    conversation_id: int
    seq: int | None
    created_at: datetime
    snippet: str
    score: float | None
    role: str | None = None
    kind: str | None = None
    depth: int | None = None
    latest_at: datetime | None = None
    line: int | None = None  # file matches: the 1-based line number


@dataclass(frozen=True, slots=True)
class GrepResult:
    matches: list[GrepMatch]
    mode: Mode
    sort: Sort
    # False when the regex scan hit its time budget before reading every candidate.
    complete: bool = True
    scanned: int | None = None
    notes: list[str] = field(default_factory=list)
    sources: Any = None  # lcm.retrieval.expand.Expansion of the summary hits, when asked


@dataclass(frozen=True, slots=True)
class GrepLimits:
    timeout_ms: int
    max_pattern_chars: int
    half_life_hours: float
    semantic: SemanticOptions = field(default_factory=SemanticOptions)
    # Snippets with their secrets masked (the tenant's ``grep`` surface);
    # expand-query's loop always masks.
    mask_secrets: bool = True


def message_ref(message_id: int) -> str:
    return f"msg_{message_id}"


def grep(
    session: Session,
    bounds: Bounds,
    query: GrepQuery,
    limits: GrepLimits,
    *,
    now: datetime | None = None,
) -> GrepResult:
    """Run ``query`` inside ``bounds``; refuses bad patterns with :class:`InvalidInput`."""
    if not 1 <= query.limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be between 1 and {MAX_LIMIT}")
    repo = SearchRepository(session)
    targets = _TARGETS[query.scope]
    now = now or utcnow()
    if query.mode == "semantic" or query.mode == "hybrid":
        ask = SemanticAsk(
            query.pattern,
            query.mode,
            targets,
            query.sort,
            query.limit,
            limits.timeout_ms,
            limits.half_life_hours,
        )
        found = semantic_grep(repo, bounds, ask, limits.semantic, now)
        matches = _matches(session, bounds.tenant_id, found.found)
        return GrepResult(matches, query.mode, query.sort, found.complete, None, found.notes)
    if query.mode == "full_text":
        text_query = parse_text_query(query.pattern)
        return _full_text(repo, bounds, query, text_query, targets, limits, now)
    regex = compile_regex(query.pattern, limits.max_pattern_chars)
    return _regex(repo, bounds, query, regex, targets, limits, now)


def best_conversations(
    session: Session, bounds: Bounds, pattern: str, limits: GrepLimits, limit: int
) -> list[tuple[int, float]]:
    """Conversations by their best match to ``pattern`` (messages and summaries).

    The relevance is grep's own (``sort: relevance``): full text, or hybrid
    where the deployment has semantic recall on (:func:`_best_by_meaning`);
    best first, ties to the newer conversation. :class:`InvalidInput` for a
    pattern full text refuses, as grep (hybrid ranks it by meaning alone).
    """
    if limits.semantic.enabled:
        return _best_by_meaning(session, bounds, pattern, limits, limit)
    repo = SearchRepository(session)
    text_query = parse_text_query(pattern)
    best: dict[int, float] = {}
    try:
        with repo.statement_deadline(limits.timeout_ms):
            for target in _TARGETS["both"]:
                for cid, score in repo.best_conversations(
                    target, bounds, text_query, limit
                ).items():
                    best[cid] = max(score, best.get(cid, score))
    except OperationalError as exc:
        if is_timeout(exc):
            raise refuse_timeout(limits.timeout_ms) from exc
        raise
    return sorted(best.items(), key=lambda item: (-item[1], -item[0]))[:limit]


def _best_by_meaning(
    session: Session, bounds: Bounds, pattern: str, limits: GrepLimits, limit: int
) -> list[tuple[int, float]]:
    """Conversations by their best hybrid grep hit: full text and meaning, fused by rank.

    One hybrid grep over the widest pool grep allows (``MAX_LIMIT`` texts);
    a conversation scores as its best text's fused score. Its dense side
    keeps only texts at or above the tenant's ``semantic_min_similarity``:
    a conversation nothing in which is near ``pattern`` (and no word of it
    occurs) is not matched (``no_match``), as with full text.
    """
    ask = SemanticAsk(
        pattern,
        "hybrid",
        _TARGETS["both"],
        "relevance",
        MAX_LIMIT,
        limits.timeout_ms,
        limits.half_life_hours,
        limits.semantic.min_similarity,
    )
    found = semantic_grep(SearchRepository(session), bounds, ask, limits.semantic, utcnow())
    best: dict[int, float] = {}
    for row, _spans in found.found:
        score = row.score or 0.0
        best[row.conversation_id] = max(score, best.get(row.conversation_id, score))
    return sorted(best.items(), key=lambda item: (-item[1], -item[0]))[:limit]


def _full_text(
    repo: SearchRepository,
    bounds: Bounds,
    query: GrepQuery,
    text_query: TextQuery,
    targets: tuple[Target, ...],
    limits: GrepLimits,
    now: datetime,
) -> GrepResult:
    half_life = limits.half_life_hours * 3600
    rows: list[SearchRow] = []
    try:
        with repo.statement_deadline(limits.timeout_ms):
            for target in targets:
                rows += repo.full_text(
                    target, bounds, text_query, query.sort, query.limit, now, half_life
                )
    except OperationalError as exc:
        if is_timeout(exc):
            raise refuse_timeout(limits.timeout_ms) from exc
        raise
    # Each target returned its own best `limit`; the merged best are among them.
    rows = sorted(rows, key=_sort_key(query.sort), reverse=True)[: query.limit]
    pattern = highlight_pattern(text_query)
    matches = _matches(
        repo.session,
        bounds.tenant_id,
        [(row, [m.span() for m in _first(pattern.finditer(row.content), 20)]) for row in rows],
        limits.mask_secrets,
    )
    return GrepResult(matches, "full_text", query.sort)


def _regex(
    repo: SearchRepository,
    bounds: Bounds,
    query: GrepQuery,
    regex: RegexQuery,
    targets: tuple[Target, ...],
    limits: GrepLimits,
    now: datetime,
) -> GrepResult:
    deadline = time.monotonic() + limits.timeout_ms / 1000
    half_life = limits.half_life_hours * 3600
    best: list[tuple[Any, int, SearchRow, list[tuple[int, int]]]] = []
    scanned, complete, order = 0, True, 0
    try:
        with repo.statement_deadline(limits.timeout_ms):
            for target in targets:
                found = 0
                for row in repo.stream_candidates(target, bounds, regex.literals):
                    scanned += 1
                    if time.monotonic() > deadline:
                        complete = False
                        break
                    spans = regex.spans(row.content)
                    if not spans:
                        continue
                    scored = _with_score(row, len(spans), query.sort, now, half_life)
                    order += 1
                    entry = (_sort_key(query.sort)(scored), -order, scored, spans)
                    if len(best) < query.limit:
                        heapq.heappush(best, entry)
                    else:
                        heapq.heappushpop(best, entry)
                    found += 1
                    # Candidates arrive newest first: for recency the first
                    # `limit` hits of a target are its best.
                    if query.sort == "recency" and found >= query.limit:
                        break
                if not complete:
                    break
    except OperationalError as exc:
        if not is_timeout(exc):
            raise
        complete = False
    ranked = sorted(best, key=lambda e: (e[0], e[1]), reverse=True)
    notes = [] if complete else ["time budget reached: results cover the newest rows scanned"]
    matches = _matches(
        repo.session,
        bounds.tenant_id,
        [(row, spans) for _key, _order, row, spans in ranked],
        limits.mask_secrets,
    )
    return GrepResult(matches, "regex", query.sort, complete, scanned, notes)


def _with_score(
    row: SearchRow, hits: int, sort: Sort, now: datetime, half_life_seconds: float
) -> SearchRow:
    """Regex relevance: more occurrences score higher (hits / (hits + 1))."""
    relevance = hits / (hits + 1)
    if sort == "hybrid":
        # The same decay as the full-text SQL: x 2^(-age / half_life), clamped.
        age = max((now - row.at).total_seconds(), 0.0)
        relevance *= math.exp(max(-math.log(2) * age / half_life_seconds, MIN_EXPONENT))
    return SearchRow(
        row.target,
        row.id,
        row.conversation_id,
        row.seq,
        row.at,
        row.created_at,
        row.content,
        row.role,
        row.kind,
        row.depth,
        relevance,
    )


def _sort_key(sort: Sort) -> Callable[[SearchRow], tuple[Any, ...]]:
    def key(row: SearchRow) -> tuple[Any, ...]:
        recency = (row.at, row.target, str(row.id))
        if sort == "recency":
            return recency
        return (row.score or 0.0, *recency)

    return key


def _matches(
    session: Session,
    tenant_id: str,
    found: list[tuple[SearchRow, list[tuple[int, int]]]],
    mask: bool = True,
) -> list[GrepMatch]:
    """The hits as matches, each snippet cut from the text with its secrets masked.

    A message's secrets are its stored spans; a summary's are whatever the
    detector finds (a summary written before masking may quote one).
    """
    masks = content_masks(
        session, tenant_id, [int(row.id) for row, _ in found if mask and row.target == "message"]
    )
    matches = []
    for row, spans in found:
        if row.target == "message" or not mask:
            secrets = masks.get(int(row.id), [])
        else:
            secrets = [SecretSpan(None, f.start, f.length, f.kind, 0) for f in detect(row.content)]
        content = row.content
        if secrets:
            content, spans = mask_ranges(content, secrets, spans)
        matches.append(_match(row, content, spans))
    return matches


def _match(row: SearchRow, content: str, spans: list[tuple[int, int]]) -> GrepMatch:
    ref = message_ref(int(row.id)) if row.target == "message" else str(row.id)
    return GrepMatch(
        type=row.target,
        id=row.id,
        ref=ref,
        conversation_id=row.conversation_id,
        seq=row.seq,
        created_at=row.created_at,
        snippet=build_snippet(content, spans),
        score=None if row.score is None else round(row.score, 6),
        role=row.role,
        kind=row.kind,
        depth=row.depth,
        latest_at=row.at if row.target == "summary" else None,
    )


def _first(items: Iterable[Any], n: int) -> list[Any]:
    out = []
    for item in items:
        out.append(item)
        if len(out) >= n:
            break
    return out

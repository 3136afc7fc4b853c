"""All SQL of grep: full text through each database's own index, regex candidates.

Postgres: the generated ``content_tsv`` column (GIN) with
``websearch_to_tsquery`` and ``ts_rank_cd``; ``pg_trgm`` GIN indexes serve
CJK queries (substring ``ILIKE``) and the literal prefilter of regex mode.
SQLite: FTS5 ``*_fts`` tables (unicode61, bm25) and ``*_trigram`` tables.
Both rank with the same formula (see :mod:`lcm.retrieval.ranking_sql`).

SQLite indexes messages after their ingest commits (``search_backlog``,
:mod:`lcm.retrieval.search_backlog`), so every message query there also reads
the backlog's rows with plain predicates: ``instr`` / ``LIKE`` where the
trigram table would answer, and for full text a substring match of the
query's terms (ranked by occurrences instead of bm25: approximate, and only
until the drain indexes them). The backlog is usually empty or a few rows.
"""

from __future__ import annotations

import math
import time
from collections.abc import Generator, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Float,
    and_,
    case,
    cast,
    column,
    func,
    literal_column,
    not_,
    or_,
    select,
    table,
    text,
    union_all,
)
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from lcm.db.models import Message, Summary
from lcm.errors import InvalidInput
from lcm.retrieval.match_repository import newest_matches
from lcm.retrieval.query import Term, TextQuery
from lcm.retrieval.ranking_sql import (
    PHRASE_WEIGHT,
    Target,
    fts5_match,
    hybrid,
    row_id,
    table_name,
    tsvector_match,
)
from lcm.retrieval.search_backlog_repository import (
    SearchBacklogRepository,
    backlog_ids,
    backlog_ids_where,
)
from lcm.retrieval.search_rows import (
    Bounds,
    SearchRow,
    Sort,
    content_column,
    order_key,
    recency_column,
    row_select,
    to_row,
    within_bounds,
)

_PG_QUERY_CANCELED = "57014"


def is_timeout(exc: OperationalError) -> bool:
    """True when the database cancelled a statement for running past its deadline."""
    orig = exc.orig
    return getattr(orig, "sqlstate", None) == _PG_QUERY_CANCELED or "interrupted" in str(orig)


class SearchRepository:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.dialect = session.get_bind().dialect.name
        self._binds = 0  # unique bind names for repeated trigram subqueries
        self._has_backlog: bool | None = None  # SQLite: read once (one snapshot)

    @contextmanager
    def statement_deadline(self, milliseconds: int) -> Iterator[None]:
        """No search statement outlives ``milliseconds``.

        Postgres: ``SET LOCAL statement_timeout`` (this transaction only; a
        statement past it is cancelled server-side). SQLite has no such
        setting, so a progress handler interrupts the running statement.
        """
        if self.dialect == "postgresql":
            self.session.execute(text(f"SET LOCAL statement_timeout = {int(milliseconds)}"))
            yield
            return
        raw: Any = self.session.connection().connection.driver_connection
        deadline = time.monotonic() + milliseconds / 1000
        raw.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
        try:
            yield
        finally:
            raw.set_progress_handler(None, 0)

    # --- full text --------------------------------------------------------------

    def full_text(
        self,
        target: Target,
        bounds: Bounds,
        query: TextQuery,
        sort: Sort,
        limit: int,
        now: datetime,
        half_life_seconds: float,
        *,
        by_id: bool = False,
        among: Sequence[int | str] | None = None,
    ) -> list[SearchRow]:
        """The best ``limit`` rows of ``target`` for ``query``, ordered as ``sort`` says;
        with ``among``, only those ids (and SQLite's backlog) are ranked."""
        base: Any = Message.__table__ if target == "message" else Summary.__table__
        source: Any = base
        backlog: list[SearchRow] = []
        if target == "message" and not query.cjk and self._backlog_exists():
            # Committed but not in messages_fts yet: matched by substring.
            plain_match, plain_relevance = self._substring_match(target, query, plain=True)
            backlog = self._ranked(
                target,
                base,
                and_(plain_match, Message.id.in_(backlog_ids())),
                plain_relevance,
                bounds,
                sort,
                limit,
                now,
                half_life_seconds,
                by_id=True,
            )
        source, match, relevance = self._text_match(target, base, query)
        if among is not None:
            match = and_(match, row_id(target).in_(list(among)))
        rows = self._ranked(
            target, source, match, relevance, bounds, sort, limit, now, half_life_seconds
        )
        if not backlog:
            return rows
        merged = sorted(rows + backlog, key=order_key(sort), reverse=True)
        return merged[:limit]

    def _text_match(self, target: Target, base: Any, query: TextQuery) -> tuple[Any, Any, Any]:
        """What full text reads (``source``), its predicate and its relevance expression."""
        if query.cjk:
            return (base, *self._substring_match(target, query))
        if self.dialect == "postgresql":
            return (base, *tsvector_match(target, query))
        match, relevance = fts5_match(target, query)
        fts = table(f"{table_name(target)}_fts", column("rowid"), column("summary_id"))
        key = fts.c.rowid if target == "message" else fts.c.summary_id
        # The FTS table drives the query: bm25() exists only in its scan.
        return fts.join(base, key == row_id(target)), match, relevance

    def newest_matches(
        self, target: Target, bounds: Bounds, query: TextQuery, limit: int
    ) -> list[int | str]:
        """The ids of the newest ``limit`` rows ``query`` matches, unranked.

        Ranking reads every match's text; a question's keywords ORed can match
        most of a tenant's history (seconds of ``ts_rank_cd``), so hybrid
        ranks only these (the plan: :mod:`lcm.retrieval.match_repository`).
        SQLite's backlog rows are not among them.
        """
        base: Any = Message.__table__ if target == "message" else Summary.__table__
        source, match, _relevance = self._text_match(target, base, query)
        fts = self.dialect == "sqlite" and not query.cjk
        return newest_matches(self.session, target, bounds, source, match, limit, fts=fts)

    def best_conversations(
        self, target: Target, bounds: Bounds, query: TextQuery, limit: int
    ) -> dict[int, float]:
        """The ``limit`` conversations whose best ``target`` row matches best, with its relevance.

        The relevance is full text's (the same expression grep ranks by), taken
        per row and reduced to each conversation's best, so a conversation
        with many good matches does not push others out as a row limit would.
        """
        base: Any = Message.__table__ if target == "message" else Summary.__table__
        source, match, relevance = self._text_match(target, base, query)
        best = self._best(base, source, match, relevance, within_bounds(target, bounds), limit)
        if target == "message" and not query.cjk and self._backlog_exists():
            # Committed but not in messages_fts yet: matched by substring.
            plain_match, plain_relevance = self._substring_match(target, query, plain=True)
            where = [Message.id.in_(backlog_ids()), *within_bounds(target, bounds, indexed=False)]
            for cid, score in self._best(
                base, base, plain_match, plain_relevance, where, limit
            ).items():
                best[cid] = max(score, best.get(cid, score))
        return best

    def _best(
        self, base: Any, source: Any, match: Any, relevance: Any, where: list[Any], limit: int
    ) -> dict[int, float]:
        inner = (
            select(base.c.conversation_id.label("cid"), relevance.label("rel"))
            .select_from(source)
            .where(match, *where)
        )
        if self.dialect == "sqlite":
            # A LIMIT (-1: none) keeps SQLite from flattening the FTS scan into
            # the aggregate, where bm25() may not be called.
            inner = inner.limit(-1)
        rows = inner.subquery()
        best = func.max(rows.c.rel).label("best")
        stmt = (
            select(rows.c.cid, best)
            .group_by(rows.c.cid)
            .order_by(best.desc(), rows.c.cid.desc())
            .limit(limit)
        )
        return {int(cid): float(score or 0.0) for cid, score in self.session.execute(stmt)}

    def _ranked(
        self,
        target: Target,
        source: Any,
        match: Any,
        relevance: ColumnElement[float],
        bounds: Bounds,
        sort: Sort,
        limit: int,
        now: datetime,
        half_life_seconds: float,
        *,
        by_id: bool = False,
    ) -> list[SearchRow]:
        if self.dialect == "sqlite" and sort == "hybrid":
            raw: Any = self.session.connection().connection.driver_connection
            raw.create_function("lcm_exp", 1, math.exp, deterministic=True)
        at = recency_column(target)
        score = (
            hybrid(relevance, at, now, half_life_seconds, self.dialect)
            if sort == "hybrid"
            else relevance
        )
        order = [at.desc(), row_id(target).desc()]
        if sort != "recency":
            order.insert(0, score.desc())
        stmt = row_select(target, score).select_from(source)
        stmt = stmt.where(match, *within_bounds(target, bounds, indexed=not by_id))
        return self._rows(target, stmt.order_by(*order).limit(limit))

    def _backlog_exists(self) -> bool:
        """True on SQLite while some committed message is not indexed yet.

        Read once per repository: grep runs in one transaction (one
        snapshot), which then reads the indexes too. Usually False, and then
        no query pays for the backlog at all.
        """
        if self._has_backlog is None:
            self._has_backlog = (
                self.dialect == "sqlite" and SearchBacklogRepository(self.session).any_pending()
            )
        return self._has_backlog

    def _substring_match(
        self, target: Target, query: TextQuery, *, plain: bool = False
    ) -> tuple[ColumnElement[bool], ColumnElement[float]]:
        """Every term is a substring: through the trigram indexes, or ``plain`` (a row scan).

        CJK queries go this way; so do SQLite's backlog rows (``plain``: the
        caller limits the rows to the backlog, which the indexes do not hold).
        """
        content = content_column(target)

        def contains(needle: str) -> ColumnElement[bool]:
            return _instr(content, needle) if plain else self._contains(target, needle)

        groups = [or_(*[contains(t.text) for t in g]) for g in query.groups]
        excluded = [not_(contains(t.text)) for t in query.excluded]
        occurrences: Any = sum(
            (func.length(content) - func.length(func.replace(content, t.text, "")))
            / max(len(t.text), 1)
            for t in _words(query.positive_terms)
        )
        squashed = cast(occurrences, Float) / (cast(occurrences, Float) + 1.0)
        phrase = case((contains(query.phrase_text), 1.0), else_=0.0)
        relevance = PHRASE_WEIGHT * phrase + (1 - PHRASE_WEIGHT) * squashed
        return and_(*groups, *excluded), relevance

    def _contains(self, target: Target, needle: str) -> ColumnElement[bool]:
        content = content_column(target)
        if self.dialect == "postgresql":
            # pg_trgm's GIN index answers ILIKE '%…%' for needles of 3+ characters.
            return content.ilike(f"%{_escape_like(needle)}%")
        if len(needle) < 3:
            # An FTS5 trigram table matches nothing shorter than a trigram.
            return _instr(content, needle)
        fts = f"{table_name(target)}_trigram"
        key = "rowid" if target == "message" else "summary_id"
        self._binds += 1
        name = f"trigram_{self._binds}"
        ids: Any = (
            select(literal_column(key))
            .select_from(table(fts))
            .where(
                text(f"{fts} MATCH :{name}").bindparams(
                    **{name: '"' + needle.replace('"', '""') + '"'}
                )
            )
        )
        if target == "message" and self._backlog_exists():
            ids = union_all(ids, backlog_ids_where(lambda content: _instr(content, needle)))
        return row_id(target).in_(ids)

    # --- regex candidates ---------------------------------------------------------

    def stream_candidates(
        self, target: Target, bounds: Bounds, literals: Sequence[str]
    ) -> Generator[SearchRow, None, None]:
        """Rows that may match, newest first, streamed (server-side cursor on Postgres).

        ``literals`` must all occur in a matching row; the trigram indexes find
        the rows that hold them, so RE2 only reads those.
        """
        stmt = row_select(target, None).where(*within_bounds(target, bounds))
        for literal in literals:
            stmt = stmt.where(self._prefilter(target, literal))
        stmt = stmt.order_by(recency_column(target).desc(), row_id(target).desc())
        result = self.session.execute(stmt, execution_options={"yield_per": 500})
        try:
            for row in result:
                yield to_row(target, row._mapping)
        finally:
            result.close()

    def _prefilter(self, target: Target, literal: str) -> ColumnElement[bool]:
        if self.dialect == "postgresql":
            return content_column(target).ilike(f"%{literal}%")
        fts = f"{table_name(target)}_trigram"
        key = "rowid" if target == "message" else "summary_id"
        ids: Any = (
            select(literal_column(key))
            .select_from(table(fts))
            .where(column("content").like(f"%{literal}%"))
        )
        if target == "message" and self._backlog_exists():
            # The same LIKE (ASCII case folded, like the trigram table's) over the backlog.
            ids = union_all(ids, backlog_ids_where(lambda content: content.like(f"%{literal}%")))
        return row_id(target).in_(ids)

    def rows_by_ids(
        self, target: Target, bounds: Bounds, ids: Sequence[int | str]
    ) -> list[SearchRow]:
        """The rows of ``ids`` that ``bounds`` allows (a dense search's hits, made hits)."""
        if not ids:
            return []
        stmt = row_select(target, None).where(
            row_id(target).in_(list(ids)),
            *within_bounds(target, bounds, indexed=self.dialect != "sqlite"),
        )
        return self._rows(target, stmt)

    def _rows(self, target: Target, stmt: Any) -> list[SearchRow]:
        return [to_row(target, row._mapping) for row in self.session.execute(stmt)]


# --- building blocks ----------------------------------------------------------------


def _instr(content: Any, needle: str) -> ColumnElement[bool]:
    """Case-insensitive (ASCII) substring test by scanning the text itself."""
    return func.instr(func.lower(content), needle.lower()) > 0


def _words(terms: Sequence[Term]) -> list[Term]:
    return [t for t in terms if t.text]


def _escape_like(needle: str) -> str:
    # Backslash is Postgres's default LIKE escape; pg_trgm understands it too.
    return needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def refuse_timeout(milliseconds: int) -> InvalidInput:
    return InvalidInput(
        f"the search ran past its {milliseconds} ms limit; narrow it with conversation_id, "
        "since/before, a longer literal in the pattern, or full_text mode",
        code="search_timeout",
    )

"""The dense statement on Postgres with pgvector: the nearest vectors of a scope.

Three plans answer it. A scope of few vectors is scored exactly (every
distance sorted, read through the scope's btree index). A wide scope walks
an HNSW graph: ``ix_embeddings_embedding_hnsw`` over every vector, or, for a
scope of summaries alone, migration 0035's ``ix_embeddings_summary_hnsw``,
which holds only summaries, so a summaries scope is not filtered out of a
graph whose neighbours are ~94% messages.

A walk's cost grows with the rows it must return, and steeply under a
selective filter (a small tenant: 5% of the graph's neighbours kept): at 1M
vectors, 180 rows of a small tenant's messages took 80-250 ms where its first
60 took 10-40 ms. A text embedded in chunks can fill several places, so up
to ``ROWS_PER_SOURCE`` rows a wanted text are allowed; but a walk's rows are
read from a server-side cursor, ``want`` at a time, and reading stops as
soon as ``want`` different texts are in: the walk goes no further than it
must (docs/performance.md, Semantic at scale). An exact sort reads its whole
scope before its first row, so it is read in one statement as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import bindparam, literal, select, text
from sqlalchemy.orm import Session

from lcm.db import PGVECTOR_SUMMARY_INDEX, Embedding

# Below this many vectors in a dense search's bounds (as the planner
# estimates them) the search is exact, a sort of every distance, rather than
# the HNSW walk: a few ms of distances, where a filtered walk over a scope this
# small can read most of the graph (bench/semantic_scale.py; docs/performance.md).
# Exact costs ~3 us a vector through migration 0033's index; at 1M vectors a
# tenant's 11,800 / 23,500 summaries took 53 / 74 ms exact against 200 / 133 ms
# through the graph (p50), while 50,000 messages took 154 ms exact, 71 ms walked.
EXACT_SEARCH_BELOW = 30_000
# The same for a scope of summaries alone, walked on migration 0035's graph of
# summaries: there a big tenant's 23,500 summaries (40% of that graph) took
# 2.5-17 ms for their nearest 60 against 50-90 ms exact; a small tenant's 3,000
# (5%) 4-14 ms exact.
EXACT_SUMMARIES_BELOW = 10_000
ROWS_PER_SOURCE = 3  # the most rows read per wanted text (its chunks)

_SUMMARY_GRAPH: dict[str, bool] = {}  # per database URL: has migration 0035 built it


class NearestRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def nearest(
        self,
        bounds: Sequence[Any],
        targets: Sequence[str],
        query_vector: Sequence[float],
        want: int,
    ) -> list[tuple[str, str, int, float]]:
        """(target, source, conversation, similarity) of the nearest rows in ``bounds``,
        read until ``want`` different texts (sources) are in, or ``want`` x
        ``ROWS_PER_SOURCE`` rows: the caller keeps each text's best row."""
        from pgvector.sqlalchemy import Vector  # the semantic extra: only reached with it

        # Iterative index scans (pgvector 0.8) keep walking the HNSW graph when
        # the tenant/scope filter drops candidates, instead of returning fewer.
        # A custom plan each time: the best plan depends on the scope's size
        # (one conversation: its index and an exact sort of its few thousand
        # rows; a tenant's history: the HNSW graph), which only the values
        # tell, and a cached generic plan would pick one for every scope.
        # A walk's rows come from a cursor, which Postgres would otherwise plan
        # for its first 10% (cursor_tuple_fraction): planned as the statement it is.
        self.session.execute(
            text(
                "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), "
                "set_config('plan_cache_mode', 'force_custom_plan', true), "
                "set_config('cursor_tuple_fraction', '1', true)"
            )
        )
        # <#> is the negated inner product: the vectors are unit length, so
        # ordering by it ascending is by cosine similarity, highest first. The
        # query is bound as a vector, not as text cast in the statement: a
        # cast of a text parameter is redone for every row an exact sort reads.
        q = bindparam("q", value=list(query_vector), type_=Vector(384))
        distance = text("embedding <#> :q").bindparams(q)
        # A scope of few vectors is scored exactly: the HNSW walk under a
        # selective filter reads the graph until enough of its rows turn up
        # (seconds for a small tenant's summaries), a sort of a few thousand
        # distances takes milliseconds. ``+ 0`` is an order the index cannot
        # serve, so the planner reads the scope through its btree filter.
        exact = self.estimated_rows(bounds) < self._exact_below(targets)
        order = text("(embedding <#> :q) + 0").bindparams(q) if exact else distance
        statement = (
            select(Embedding.target, Embedding.source, Embedding.conversation_id, distance)
            .where(*bounds)
            .order_by(order)
            .limit(want * ROWS_PER_SOURCE)
        )
        if exact:
            # A sort reads every row of the scope before its first: a cursor
            # would save nothing and cost three round trips more.
            return _until(want, [self.session.execute(statement).all()], whole=False)
        result = self.session.execute(statement, execution_options={"yield_per": want})
        try:
            # Read ``want`` rows at a time; the walk stops where reading does.
            # A batch is kept whole: relaxed order may put a nearer row after a
            # farther one, and it is read already.
            return _until(want, result.partitions(), whole=True)
        finally:
            result.close()  # the cursor, closed with its rest unread

    def _exact_below(self, targets: Sequence[str]) -> int:
        if list(targets) == ["summary"] and self.has_summary_graph:
            return EXACT_SUMMARIES_BELOW
        return EXACT_SEARCH_BELOW

    @property
    def has_summary_graph(self) -> bool:
        """True where migration 0035 built the graph of summaries (pgvector present)."""
        key = str(self.session.get_bind().engine.url)
        if key not in _SUMMARY_GRAPH:
            _SUMMARY_GRAPH[key] = bool(
                self.session.scalar(
                    text(
                        "SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                        "WHERE c.relname = :name AND i.indisvalid"
                    ),
                    {"name": PGVECTOR_SUMMARY_INDEX},
                )
            )
        return _SUMMARY_GRAPH[key]

    def estimated_rows(self, bounds: Sequence[Any]) -> float:
        """The planner's estimate of the vectors ``bounds`` holds (statistics, no rows read).

        Not a count, even a bounded one: counting a large tenant's summaries
        reads index entries by the ten thousand. The estimate multiplies the
        columns' statistics; a scope it misjudges costs time, never results.
        """
        statement = select(literal(1)).select_from(Embedding).where(*bounds)
        compiled = statement.compile(
            dialect=self.session.get_bind().dialect, compile_kwargs={"render_postcompile": True}
        )
        plan = self.session.connection().exec_driver_sql(
            "EXPLAIN (FORMAT JSON) " + str(compiled), compiled.params
        )
        return float(plan.scalar_one()[0]["Plan"]["Plan Rows"])


def _until(
    want: int, batches: Iterable[Sequence[Any]], *, whole: bool
) -> list[tuple[str, str, int, float]]:
    """The rows of ``batches`` up to the one (``whole``: the batch) where ``want``
    different texts are in, all when fewer are: (target, source, conversation, similarity)."""
    found: list[tuple[str, str, int, float]] = []
    sources: set[str] = set()
    for batch in batches:
        for row in batch:
            found.append((row[0], row[1], int(row[2]), -float(row[3])))
            sources.add(row[1])
            if len(sources) >= want and not whole:
                return found
        if len(sources) >= want:
            return found
    return found

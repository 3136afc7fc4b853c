"""The newest rows a full-text query matches, unranked: hybrid grep's candidates.

Two plans answer "the newest ``limit`` matches". The walk reads the scope
newest first (``ORDER BY`` recency with ``LIMIT``) and tests each row's text:
cheap when matches are dense, since it stops after ``limit`` of them, but a
keyword that is rare in the scope makes it read the whole scope row by row
(0.6-1.2 s over a 400,000-message tenant). The text index's bitmap reads only
the matches: cheap when they are few, whatever the scope's size, but it must
read every one of them before the newest are known.

So on Postgres, when the planner expects few matches in the scope (its
estimate, no rows read), a bounded probe reads up to ``PROBE_ROWS + 1``
matches through the text index alone (sequential and ordered index scans off
for that statement): if there are no more than ``PROBE_ROWS`` of them, they
are every match, and the newest ``limit`` are picked from them here. Else (or
when the estimate was many) the walk runs as before. Either way the answer is
the same set the walk returns: the newest ``limit`` by (recency, id).

SQLite plans the walk too (the tenant's recency index, each row's text
looked up in the FTS table: 140-200 ms for a rare keyword over 9,000
messages). Its FTS table can stop after a number of matches, so there the
probe is exact without an estimate: the FTS table's first ``PROBE_ROWS + 1``
matches (every tenant's); when that is all of them, the newest ``limit`` of
those in the scope are read by id.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import literal, select, text
from sqlalchemy.orm import Session

from lcm.retrieval.ranking_sql import Target, row_id
from lcm.retrieval.search_rows import Bounds, recency_column, within_bounds

# The most matches the probe reads (each a heap row the bitmap visits); more
# than this and the walk, which stops after ``limit``, is the cheaper plan.
PROBE_ROWS = 4_000
# The probe is tried when the planner expects at most this many matches in
# the scope: above it the matches are dense enough that the walk ends early.
PROBE_BELOW_ESTIMATE = 40_000

_INDEX_ONLY = text(
    "SELECT current_setting('enable_seqscan'), current_setting('enable_indexscan'), "
    "set_config('enable_seqscan', 'off', true), set_config('enable_indexscan', 'off', true)"
)
_RESTORE = text(
    "SELECT set_config('enable_seqscan', :seq, true), set_config('enable_indexscan', :idx, true)"
)


def newest_matches(
    session: Session,
    target: Target,
    bounds: Bounds,
    source: Any,
    match: Any,
    limit: int,
    *,
    fts: bool,
) -> list[int | str]:
    """The ids of the newest ``limit`` rows of ``source`` that ``match`` finds in
    ``bounds`` (``fts``: SQLite's FTS5 table drives ``source``)."""
    where = [match, *within_bounds(target, bounds)]
    found: list[int | str] | None = None
    if session.get_bind().dialect.name == "postgresql" and _few(session, source, where):
        found = _probed(session, source, where, target, limit)
    elif fts:
        found = _probed_fts(session, target, bounds, source, match, limit)
    if found is not None:
        return found
    walk = (
        select(row_id(target))
        .select_from(source)
        .where(*where)
        .order_by(recency_column(target).desc(), row_id(target).desc())
        .limit(limit)
    )
    return list(session.scalars(walk))


def _probed_fts(
    session: Session, target: Target, bounds: Bounds, source: Any, match: Any, limit: int
) -> list[int | str] | None:
    """SQLite: the FTS table's first ``PROBE_ROWS + 1`` matches (every tenant's: the
    FTS index holds no tenant); when that is all of them, the newest ``limit`` of
    those in ``bounds``, read by id. None when there are more."""
    ids = list(
        session.scalars(
            select(row_id(target)).select_from(source).where(match).limit(PROBE_ROWS + 1)
        )
    )
    if len(ids) > PROBE_ROWS:
        return None
    if not ids:
        return []
    # Bounds kept off their indexes (unary +): the ids drive, by rowid or key.
    newest = (
        select(row_id(target))
        .where(row_id(target).in_(ids), *within_bounds(target, bounds, indexed=False))
        .order_by(recency_column(target).desc(), row_id(target).desc())
        .limit(limit)
    )
    return list(session.scalars(newest))


def _few(session: Session, source: Any, where: list[Any]) -> bool:
    """True when the planner expects few matches in the scope (an estimate: no rows read)."""
    statement = select(literal(1)).select_from(source).where(*where)
    compiled = statement.compile(
        dialect=session.get_bind().dialect, compile_kwargs={"render_postcompile": True}
    )
    plan = session.connection().exec_driver_sql(
        "EXPLAIN (FORMAT JSON) " + str(compiled), compiled.params
    )
    return float(plan.scalar_one()[0]["Plan"]["Plan Rows"]) <= PROBE_BELOW_ESTIMATE


def _probed(
    session: Session, source: Any, where: list[Any], target: Target, limit: int
) -> list[int | str] | None:
    """Every match when there are at most ``PROBE_ROWS`` (the newest ``limit`` of them);
    None when there are more, or when a tie at the cut leaves their order to the walk."""
    # Only the text index's bitmap can serve the probe with these off (this
    # transaction's settings, put back after): a scan with LIMIT over a filter
    # is the walk's cost again. Not restored when the probe fails: the
    # transaction is then aborted, its settings with it.
    seq, idx, *_ = session.execute(_INDEX_ONLY).one()
    probe = select(row_id(target), recency_column(target)).select_from(source).where(*where)
    rows = list(session.execute(probe.limit(PROBE_ROWS + 1)).all())
    session.execute(_RESTORE, {"seq": seq, "idx": idx})
    if len(rows) > PROBE_ROWS:
        return None
    if len(rows) <= limit:
        return [r[0] for r in rows]
    rows.sort(key=lambda r: (r[1], r[0]), reverse=True)
    if target == "summary" and rows[limit - 1][1] == rows[limit][1]:
        return None  # summary ids are text: their order at a tie is the database's collation
    return [r[0] for r in rows[:limit]]

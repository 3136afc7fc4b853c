"""The newest rows a full-text query matches, unranked: hybrid grep's candidates.

Two plans answer "the newest ``limit`` matches". The walk reads the scope
newest first (``ORDER BY`` recency with ``LIMIT``) and tests each row's text:
cheap when matches are dense, since it stops after ``limit`` of them, but a
keyword that is rare in the scope makes it read the whole scope row by row
(seconds over a 400,000-message tenant). The text index reads only the
matches: cheap when they are few, whatever the scope's size, but it must read
every one of them before the newest are known.

Postgres chooses between them by its estimate of the matches (the text
column's statistics), which holds only when the statement is planned for its
own values: a generic plan of a prepared statement (the keywords unknown) can
walk a 400,000-message tenant for a keyword that matches nothing (2.9 s at
1M vectors, where the custom plan reads the text index in 1-3 ms). So the
statement is always planned afresh.

SQLite has no statistics for its FTS tables and plans the walk (the tenant's
recency index, each row's text looked up in the FTS table: 140-350 ms for a
rare keyword over 9,000 messages). Its FTS table can stop after a number of
matches, so there a bounded probe decides: the FTS table's first
``PROBE_ROWS + 1`` matches (every tenant's: the FTS index holds no tenant);
when that is all of them, the newest ``limit`` of those in the scope are read
by id, else the walk runs as before. Either way the answer is the walk's set.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from lcm.retrieval.ranking_sql import Target, row_id
from lcm.retrieval.search_rows import Bounds, recency_column, within_bounds

# The most matches SQLite's probe reads; more than this and the walk, which
# stops after ``limit``, is the cheaper plan.
PROBE_ROWS = 4_000

_CUSTOM_PLANS = text("SELECT set_config('plan_cache_mode', 'force_custom_plan', true)")


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
    if session.get_bind().dialect.name == "postgresql":
        # For the rest of this transaction (the ranking after it too).
        session.execute(_CUSTOM_PLANS)
    elif fts:
        found = _probed_fts(session, target, bounds, source, match, limit)
        if found is not None:
            return found
    walk = (
        select(row_id(target))
        .select_from(source)
        .where(match, *within_bounds(target, bounds))
        .order_by(recency_column(target).desc(), row_id(target).desc())
        .limit(limit)
    )
    return list(session.scalars(walk))


def _probed_fts(
    session: Session, target: Target, bounds: Bounds, source: Any, match: Any, limit: int
) -> list[int | str] | None:
    """SQLite: the newest ``limit`` matches in ``bounds`` when the FTS table holds at
    most ``PROBE_ROWS`` matches in all; None when it holds more."""
    first = select(row_id(target)).select_from(source).where(match).limit(PROBE_ROWS + 1)
    ids = list(session.scalars(first))
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

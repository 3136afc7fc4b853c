"""The plans of grep's queries at a point of the growth curve (``--plans``, Postgres).

grep in one conversation should cost what that conversation's matches cost,
whatever the table holds. Its figures alone do not say why they grow; the
plan does: which index the query starts from, how many rows that index
hands back and how many the heap scan then throws away (``Rows Removed by
Filter``). ``auto_explain`` logs each statement grep runs, with ``ANALYZE``
and buffers, as a notice to this session, so the plans are those of the
real queries (the ORM's SQL, its parameters, the server-side cursor of
regex mode), not of a hand-copied statement. Loading ``auto_explain``
takes a superuser: the bench's private server has one.
"""

from __future__ import annotations

from sqlalchemy import text

from lcm.db.engine import Database
from lcm.retrieval.grep import GrepLimits, GrepQuery, grep
from lcm.retrieval.search_rows import Bounds

_SESSION = (
    "LOAD 'auto_explain'",
    "SET auto_explain.log_min_duration = 0",
    "SET auto_explain.log_analyze = on",
    "SET auto_explain.log_buffers = on",
    "SET auto_explain.log_nested_statements = on",
    "SET auto_explain.log_level = 'notice'",
    "SET client_min_messages = 'notice'",
)


def grep_plans(db: Database, bounds: Bounds, query: GrepQuery, limits: GrepLimits) -> list[str]:
    """The plans of the ``messages`` queries one warm ``grep`` runs (run twice: the
    first warms the cache, its plans are dropped)."""
    plans: list[str] = []
    with db.session() as s:
        driver = s.connection().connection.driver_connection
        assert driver is not None
        for statement in _SESSION:
            s.execute(text(statement))
        grep(s, bounds, query, limits)
        driver.add_notice_handler(lambda notice: plans.append(notice.message_primary or ""))
        grep(s, bounds, query, limits)
        s.rollback()
    return [plan for plan in plans if "FROM messages" in plan]


def print_plans(
    db: Database, bounds: Bounds, queries: dict[str, GrepQuery], limits: GrepLimits
) -> None:
    for name, query in queries.items():
        for plan in grep_plans(db, bounds, query, limits):
            body = plan.split("\n")
            shown = [line for line in body if not line.startswith(("Query Text", "Query Param"))]
            print(f"     plan of {name}:", *(f"       {line}" for line in shown), sep="\n")

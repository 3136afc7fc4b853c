"""Which recorded statements Postgres can only answer by reading a whole table.

A test records the statements some code runs (:func:`recording`), then asks
Postgres to plan each one again with sequential scans priced out
(``enable_seqscan = off``): a plan that still scans a table has no index to
use there, so it reads every tenant's rows of that table whatever the table's
size. On the small tables of a test, the planner would pick scans anyway; the
setting shows whether anything else exists.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, event

Recorded = list[tuple[str, Any]]


@contextmanager
def recording(engine: Engine) -> Iterator[Recorded]:
    """Every statement the engine runs in the block, with its parameters."""
    statements: Recorded = []

    def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        statements.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield statements
    finally:
        event.remove(engine, "before_cursor_execute", record)


def sequential_scans(engine: Engine, statements: Recorded) -> list[str]:
    """Each statement (with its plan) whose plan still scans a table when scans are priced out."""
    found = []
    with engine.connect() as conn:
        conn.exec_driver_sql("SET enable_seqscan = off")
        for statement, parameters in statements:
            if not statement.lstrip().upper().startswith(("SELECT", "UPDATE", "DELETE", "WITH")):
                continue  # BEGIN, SET, plain INSERTs: nothing to look up
            rows = conn.exec_driver_sql(f"EXPLAIN {statement}", parameters)
            plan = "\n".join(row[0] for row in rows)
            if "Seq Scan" in plan:
                found.append(f"{' '.join(statement.split())}\n{plan}")
        conn.rollback()
    return found


def rows_read(engine: Engine, statements: Recorded) -> int:
    """How many rows and index entries the recorded queries read, scans priced out.

    Each ``SELECT`` runs again under ``EXPLAIN ANALYZE``; every scan node's
    rows, with those its filter dropped, count once per loop. Unlike
    :func:`sequential_scans` this also sees an index read from end to end.
    """
    total = 0
    with engine.connect() as conn:
        conn.exec_driver_sql("SET enable_seqscan = off")
        for statement, parameters in statements:
            if statement.lstrip().upper().startswith("SELECT"):
                explained = conn.exec_driver_sql(
                    f"EXPLAIN (ANALYZE, FORMAT JSON) {statement}", parameters
                )
                total += _scanned(explained.scalar_one()[0]["Plan"])
        conn.rollback()
    return total


def _scanned(node: dict[str, Any]) -> int:
    here = 0
    if node["Node Type"].endswith("Scan") and "Relation Name" in node:
        read = node["Actual Rows"] + node.get("Rows Removed by Filter", 0)
        here = round(read * node["Actual Loops"])
    return here + sum(_scanned(child) for child in node.get("Plans", []))

"""Driver statements on SQLite (embedded mode): run on the ``sqlite3`` connection.

A :class:`~lcm.db.driver.DriverStatement` whose compiled form takes no ``IN``
list and fills in no ``onupdate`` value runs here on the session's ``sqlite3``
connection, in its transaction, as :mod:`lcm.db.driver` runs one on psycopg:
its parameters in order (one per ``?``, no binary format), the cursor events
around it, each column's type processing and a driver error raised as
SQLAlchemy's own. Assembly's window reads up to a thousand rows, and
SQLAlchemy's per-row processing was a fifth of its time; the writes of a turn
(a dozen statements under the one write lock) each paid ~100 µs of
SQLAlchemy's execution layer around a call to SQLite of a few µs. Any other
statement runs through ``Connection.execute``, whose ``Result`` has the same
methods as :class:`~lcm.db.driver_rows.DriverRows`.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection

from lcm.db.driver_rows import DriverRows, Plan, run_plan


def execute_sqlite(connection: Connection, plan: Plan, params: tuple[Any, ...]) -> DriverRows:
    """``plan`` on the session connection's ``sqlite3`` connection, in its
    transaction, with the events and errors of the Postgres path."""
    raw: Any = connection.connection.driver_connection
    cursor = raw.cursor()  # cheap on sqlite3 (no server-side state to keep)
    rows = run_plan(
        connection, cursor, plan, params, lambda: cursor.execute(plan.sql, params).fetchall()
    )
    # Read after the fetch: an UPDATE … RETURNING counts its rows as they are stepped.
    return DriverRows(rows, cursor.rowcount)


def execute_sqlite_each(
    connection: Connection, plan: Plan, batch: list[tuple[Any, ...]]
) -> list[Any]:
    """``plan`` once per parameter set, as :func:`execute_sqlite`; the cursor events
    once around the batch (an ``executemany``, as ``Connection.execute`` reports one)."""
    raw: Any = connection.connection.driver_connection
    cursor = raw.cursor()

    def each() -> list[Any]:
        found: list[Any] = []
        for params in batch:
            found.extend(cursor.execute(plan.sql, params).fetchall())
        return found

    return run_plan(connection, cursor, plan, batch, each, many=True)

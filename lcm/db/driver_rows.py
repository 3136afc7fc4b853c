"""What both paths of a driver statement share (:mod:`lcm.db.driver` on Postgres,
:mod:`lcm.db.driver_sqlite` on SQLite): a statement's compiled plan, the rows it
returns, the type processing of a row and a driver error raised as SQLAlchemy's own."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError

Processor = Callable[[Any], Any]


class DriverRows:
    """A statement's rows, fetched whole (the cursor is reused for the next statement)."""

    __slots__ = ("_rows", "rowcount")

    def __init__(self, rows: list[Any], rowcount: int) -> None:
        self._rows = rows
        self.rowcount = rowcount

    def all(self) -> list[Any]:
        return self._rows

    def first(self) -> Any | None:
        return self._rows[0] if self._rows else None

    def one(self) -> Any:
        if len(self._rows) != 1:
            raise ValueError(f"expected one row, got {len(self._rows)}")
        return self._rows[0]

    def one_or_none(self) -> Any | None:
        if len(self._rows) > 1:
            raise ValueError(f"expected at most one row, got {len(self._rows)}")
        return self._rows[0] if self._rows else None

    def scalar(self) -> Any:
        return self._rows[0][0] if self._rows else None

    def scalars(self) -> list[Any]:
        return [row[0] for row in self._rows]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._rows)


@dataclass(frozen=True, slots=True)
class Plan:
    """A statement compiled for one dialect: its SQL and the processing around it."""

    sql: str
    defaults: dict[str, Any]  # parameters the statement carries a value for (literals)
    generated: tuple[tuple[str, Callable[[], Any]], ...]  # an INSERT's callable defaults
    binds: tuple[tuple[str, Processor], ...]  # only parameters whose type processes them
    results: tuple[tuple[int, Processor], ...]  # only columns whose type processes them
    order: tuple[str, ...] = ()  # SQLite: the parameters' names, one per ``?``


def run_plan(
    connection: Connection,
    cursor: Any,
    plan: Plan,
    params: Any,
    run: Callable[[], list[Any]],
    *,
    many: bool = False,
) -> list[Any]:
    """``run()``, the driver's call of ``plan`` returning its rows, as
    ``Connection.execute`` would run it: between the ``before_cursor_execute``
    and ``after_cursor_execute`` events, a driver error raised as SQLAlchemy's
    own, each row through the plan's result processors."""
    dispatch = connection.dispatch
    if dispatch.before_cursor_execute:
        dispatch.before_cursor_execute(connection, cursor, plan.sql, params, None, many)
    try:
        rows = run()
    except connection.dialect.loaded_dbapi.Error as error:
        raise wrapped(connection, cursor, plan.sql, params, error) from error
    if dispatch.after_cursor_execute:
        dispatch.after_cursor_execute(connection, cursor, plan.sql, params, None, many)
    if plan.results:
        rows = [processed(row, plan.results) for row in rows]
    return rows


def processed(
    row: tuple[Any, ...], processors: tuple[tuple[int, Processor], ...]
) -> tuple[Any, ...]:
    """``row`` with each column that has a result processor run through it."""
    values = list(row)
    for index, process in processors:
        value = values[index]
        if value is not None:  # NULL stays None (every lcm type maps it so)
            values[index] = process(value)
    return tuple(values)


def wrapped(
    connection: Connection, cursor: Any, sql: str, params: Any, error: Exception
) -> DBAPIError:
    """The driver's error as SQLAlchemy raises it; a dead connection is invalidated first."""
    dialect = connection.dialect
    gone = dialect.is_disconnect(error, connection.connection.dbapi_connection, cursor)  # type: ignore[arg-type]
    if gone:
        connection.invalidate(error)
    raised = DBAPIError.instance(
        sql,
        params,
        error,
        dialect.loaded_dbapi.Error,
        connection_invalidated=gone,
        dialect=dialect,
    )
    assert isinstance(raised, DBAPIError)
    return raised

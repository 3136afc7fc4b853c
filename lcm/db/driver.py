"""Hot statements run on the database driver: SQLAlchemy compiles them once, psycopg runs them.

Every request of a gateway turn and every compaction pass runs a handful of
statements that are built once, at import, with bound parameters. Through
``Connection.execute`` each one still pays for SQLAlchemy's execution layer
on every call: an execution context, the compiled cache lookup, parameter
processing and a ``Result`` with its row objects. On the key lookup that is
~115 µs of CPU per statement where psycopg's own ``cursor.execute`` and
fetch take ~50 µs, and a turn runs about twenty such statements.

A :class:`DriverStatement` wraps one of them. On Postgres it compiles the
statement once for the dialect and runs the SQL on the DBAPI cursor of the
session's own connection, so it takes part in the session's transaction
exactly as ``Connection.execute`` would, with every parameter and row in
binary (psycopg quotes a text array's elements in Python). It applies what
SQLAlchemy would have applied around the call:

* each parameter's and each result column's type processing (the types'
  public ``bind_processor`` / ``result_processor``: JSON wrapped for the
  driver, timestamps made UTC-aware), only for the columns that have one
  (a NULL result stays None without a call: every lcm type maps it so);
* the ``before_cursor_execute`` / ``after_cursor_execute`` events, so
  statement logs (the tests' counts, the sharding check) and tracing
  instrumentation still see every statement;
* a driver error raised as SQLAlchemy's own (``IntegrityError`` and the
  rest, via ``DBAPIError.instance``), the connection invalidated when the
  error says it is gone.

Rows come back as plain tuples (index them; no attribute access). On SQLite
(embedded mode) a statement the driver can run as is runs on the ``sqlite3``
connection the same way (:mod:`lcm.db.driver_sqlite`); any other is
``Connection.execute``, whose ``Result`` has the same methods used here.

Only statements whose compiled form the driver can run as is are accepted:
no ``IN`` lists expanded at execution (use ``= ANY(array)``), no
``onupdate`` values; an ``INSERT`` names the columns its parameters give
(``column_keys``) and the others get their plain or callable defaults, one
row per call.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any, Protocol

from psycopg.pq import ExecStatus
from sqlalchemy import Connection, Executable, String, bindparam, func, select
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import InstrumentedAttribute, Session
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import ColumnElement

from lcm.db.driver_rows import DriverRows, Plan, Processor, run_plan
from lcm.db.driver_sqlite import execute_sqlite, execute_sqlite_each

TUPLES_OK = ExecStatus.TUPLES_OK

# Every statement built (most at import, as module constants): compile_all's list.
_BUILT: weakref.WeakSet[DriverStatement] = weakref.WeakSet()

# Connection record info key: the cursor this module reuses on a DBAPI connection.
_CURSOR = "lcm_driver_cursor"


class Rows(Protocol):
    """What callers read off a statement's result, on either path."""

    @property
    def rowcount(self) -> int: ...

    def all(self) -> Sequence[Any]: ...

    def first(self) -> Any | None: ...

    def one(self) -> Any: ...

    def one_or_none(self) -> Any | None: ...

    def scalar(self) -> Any: ...

    def scalars(self) -> Any: ...

    def __iter__(self) -> Iterator[Any]: ...


def among_json(
    column: ColumnElement[Any] | InstrumentedAttribute[Any], name: str
) -> ColumnElement[bool]:
    """``column`` among the values of the JSON array bound as ``name`` (SQLite's ``json_each``).

    The SQLite form of Postgres' ``= ANY(array)``: one statement text for any
    count of values, so it runs on the driver (an expanding ``IN`` list would
    not), with no limit on bound parameters to chunk around. Bind the values
    with :func:`json.dumps`.
    """
    values = func.json_each(bindparam(name, type_=String)).table_valued("value")
    return column.in_(select(values.c.value))


def compile_all(dialect: Dialect) -> int:
    """Compile every driver statement built so far for ``dialect``; how many.

    A process calls it as it starts (the API's startup, a worker's
    ``worker_ready``), so no request or pass pays for a compile. Elsewhere
    than on Postgres there is nothing to compile.
    """
    if dialect.name != "postgresql":
        return 0
    statements = list(_BUILT)
    for statement in statements:
        statement.compiled(dialect)
    return len(statements)


class DriverStatement:
    """A statement built once, run on the driver's cursor on Postgres (see the module)."""

    def __init__(
        self,
        statement: Executable,
        column_keys: Sequence[str] | None = None,
        *,
        elsewhere: Executable | None = None,
    ) -> None:
        """``column_keys``: the columns an INSERT writes from its parameters (the
        others get their defaults); None for any other statement. ``elsewhere``:
        the statement to run on other databases, when it differs (an ``IN`` list
        there where Postgres takes ``= ANY(array)``)."""
        self.statement = statement
        self.elsewhere = statement if elsewhere is None else elsewhere
        self.column_keys = None if column_keys is None else list(column_keys)
        self._plans: dict[str, Plan] = {}
        # SQLite: the plan of ``elsewhere`` when it can run on the driver
        # (a SELECT with no IN list), None when not; unset until first run.
        self._sqlite: Plan | None = None
        self._sqlite_known = False
        self._lock = threading.Lock()
        _BUILT.add(self)

    def run(self, session: Session, params: Mapping[str, Any] | None = None) -> Rows:
        """Run on the session's connection (its transaction); every row fetched."""
        connection = session.connection()
        dialect = connection.dialect
        if dialect.name != "postgresql":
            lite = self._sqlite if self._sqlite_known else self._sqlite_plan(dialect)
            if lite is None:
                return connection.execute(self.elsewhere, params)
            values = _values(lite, params)
            return execute_sqlite(connection, lite, tuple(values[name] for name in lite.order))
        plan = self._plans.get(dialect.name) or self.compiled(dialect)
        return _execute(connection, plan, _values(plan, params))

    def run_each(self, session: Session, rows: Sequence[Mapping[str, Any]]) -> list[Any]:
        """Run once per parameter set, in order, on the session's connection; the rows
        each run returned, concatenated (an ``INSERT … RETURNING`` per row: its ids in
        the order given).

        On SQLite (in process, where a statement is a function call) each row
        runs on the driver: what ``Connection.execute`` with a list would run,
        without the execution context and ``Result`` it builds around every
        row. On Postgres it is that ``executemany`` (one round trip).
        """
        connection = session.connection()
        dialect = connection.dialect
        lite = None
        if rows and dialect.name != "postgresql":
            lite = self._sqlite if self._sqlite_known else self._sqlite_plan(dialect)
        if lite is None:  # Postgres (one executemany, one round trip), or not on the driver
            if not rows:
                return []
            statement = self.statement if dialect.name == "postgresql" else self.elsewhere
            result = connection.execute(statement, list(rows))
            return list(result) if result.returns_rows else []
        batch = []
        for params in rows:
            values = _values(lite, params)
            batch.append(tuple(values[name] for name in lite.order))
        return execute_sqlite_each(connection, lite, batch)

    def _sqlite_plan(self, dialect: Dialect) -> Plan | None:
        """``elsewhere`` compiled for SQLite when the driver can run it as is, else None."""
        with self._lock:
            if not self._sqlite_known:
                try:
                    self._sqlite = _compile(self.elsewhere, dialect, self.column_keys)
                except ValueError:  # an IN list (Connection.execute expands it), onupdate
                    self._sqlite = None
                self._sqlite_known = True
            return self._sqlite

    def compiled(self, dialect: Dialect) -> Plan:
        """The statement's plan for ``dialect``, compiled on first use.

        Under the lock: the pool threads of a worker that has just started
        all reach the same statements at once, and each compiling its own
        copy cost a wave of 25 passes ~1 s of CPU.
        """
        with self._lock:
            plan = self._plans.get(dialect.name)
            if plan is None:
                plan = self._plans[dialect.name] = _compile(
                    self.statement, dialect, self.column_keys
                )
            return plan


def _values(plan: Plan, params: Mapping[str, Any] | None) -> dict[str, Any]:
    """The statement's parameters by name, defaults filled in, each as its type sends it."""
    values = dict(plan.defaults)
    for name, generate in plan.generated:  # columns the parameters do not give
        values[name] = generate()
    if params:
        values.update(params)
    for name, process in plan.binds:
        values[name] = process(values.get(name))
    return values


def _compile(statement: Executable, dialect: Dialect, column_keys: list[str] | None) -> Plan:
    """``statement``'s plan for ``dialect`` (raises ValueError if the driver cannot run it)."""
    compile: Any = statement.compile  # type: ignore[attr-defined]
    compiled = compile(dialect=dialect, column_keys=column_keys)
    assert isinstance(compiled, SQLCompiler)
    if compiled.literal_execute_params or compiled.post_compile_params:
        raise ValueError("a driver statement cannot expand IN lists: use = ANY(array)")
    if compiled.update_prefetch:
        raise ValueError("a driver statement cannot fill in onupdate values")
    if compiled.escaped_bind_names:
        raise ValueError("a driver statement's parameter names must need no escaping")
    named = {name: bind for bind, name in compiled.bind_names.items()}
    defaults = {name: bind.effective_value for name, bind in named.items() if not bind.required}
    # An INSERT of the columns in ``column_keys``: the table's other
    # columns get their Python-side defaults, as SQLAlchemy gives them.
    generated: list[tuple[str, Callable[[], Any]]] = []
    for column in compiled.insert_prefetch:
        default: Any = column.default
        if default is None or not (default.is_scalar or default.is_callable):
            raise ValueError(f"{column.key}: a driver statement fills in plain defaults only")
        if default.is_scalar:
            defaults[column.key] = default.arg
        else:  # SQLAlchemy wraps a default function to take an execution context
            generated.append((column.key, partial(default.arg, None)))
    binds, results = _processors(statement, named, dialect)
    sql = compiled.string
    if dialect.name != "postgresql":  # SQLite's ``?`` in order
        order = tuple(compiled.positiontup or ())
        return Plan(sql, defaults, tuple(generated), binds, results, order)
    # Every parameter in binary (``%(name)b``): psycopg dumps a list in
    # text format by default, quoting each element in Python (a batch's
    # contents cost ~40 µs a kilobyte), where the binary dump copies them.
    for name in named:
        sql = sql.replace(f"%({name})s", f"%({name})b")
    return Plan(sql, defaults, tuple(generated), binds, results)


def _processors(
    statement: Executable, named: Mapping[str, Any], dialect: Dialect
) -> tuple[tuple[tuple[str, Processor], ...], tuple[tuple[int, Processor], ...]]:
    """The parameters and the result columns whose types process them, with how."""
    binds = []
    for name, bind in named.items():
        process = bind.type.dialect_impl(dialect).bind_processor(dialect)
        if process is not None:
            binds.append((name, process))
    columns = getattr(statement, "exported_columns", ())  # a text() statement: none
    results = []
    for index, column in enumerate(columns):
        process = column.type.dialect_impl(dialect).result_processor(dialect, None)
        if process is not None:
            results.append((index, process))
    return tuple(binds), tuple(results)


def _execute(connection: Connection, plan: Plan, params: dict[str, Any]) -> DriverRows:
    fairy = connection.connection
    raw = fairy.driver_connection
    cursor = fairy.info.get(_CURSOR)
    if cursor is None or cursor.connection is not raw or cursor.closed:
        cursor = raw.cursor()  # type: ignore[union-attr]
        fairy.info[_CURSOR] = cursor

    def fetch() -> list[Any]:
        cursor.execute(plan.sql, params, binary=True)  # rows in binary too
        result = cursor.pgresult  # not ``description``: it builds column objects each time
        return cursor.fetchall() if result is not None and result.status == TUPLES_OK else []

    rows = run_plan(connection, cursor, plan, params, fetch)
    return DriverRows(rows, cursor.rowcount)

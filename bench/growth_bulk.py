"""A bulk load into the growth benchmark's Postgres, the way an operator runs one.

Loading millions of rows with every index and foreign key in place costs a
B-tree or GIN insertion per index and a key lookup per foreign key for each
row (``EXPLAIN ANALYZE`` of the load shows the foreign-key triggers and the
GIN inserts as most of its time). So for a big load, on the tables it writes
(``LOADED``), the secondary indexes, unique constraints and foreign keys are
read from the catalog, dropped, and rebuilt from their own definitions after
the rows are in: one sort per index, one anti-join per foreign key (which
validates every row, as the per-row check would have). Primary keys stay:
the load's own reads go through them, and ids ascend, so their insertions
are cheap appends. After the commit the tables are vacuumed and analysed (a
long-running service's tables are: visibility map set, statistics fresh)
and a checkpoint writes the load out, so no measurement pays for it.

The database then holds exactly the schema it had before (``schema_of``
compares; ``tests/integration/test_growth_bulk.py`` checks it).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sqlalchemy import Connection, Engine, text

LOADED = ("messages", "message_parts", "context_items")

# Unique and foreign-key constraints of the loaded tables (not the primary keys).
_CONSTRAINTS = """
SELECT c.conrelid::regclass::text, c.conname, c.contype, pg_get_constraintdef(c.oid)
FROM pg_constraint c
WHERE c.conrelid::regclass::text = ANY(:tables) AND c.contype IN ('u', 'f')
ORDER BY c.conname
"""
# Their indexes that back no constraint (those go and come back with it).
_INDEXES = """
SELECT t.relname, x.relname, 'i', pg_get_indexdef(i.indexrelid)
FROM pg_index i
JOIN pg_class x ON x.oid = i.indexrelid
JOIN pg_class t ON t.oid = i.indrelid
WHERE t.relname = ANY(:tables) AND t.relnamespace = CAST(current_schema() AS regnamespace)
  AND NOT EXISTS (
    SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid AND k.conrelid = i.indrelid
  )
ORDER BY x.relname
"""


@dataclass(frozen=True)
class Deferred:
    """An index or constraint set aside for a load, and how to put it back."""

    table: str
    name: str
    kind: str  # "u" unique constraint, "f" foreign key, "i" plain index
    definition: str

    def drop(self) -> str:
        if self.kind == "i":
            return f'DROP INDEX "{self.name}"'
        return f'ALTER TABLE "{self.table}" DROP CONSTRAINT "{self.name}"'

    def create(self) -> str:
        if self.kind == "i":
            return self.definition
        return f'ALTER TABLE "{self.table}" ADD CONSTRAINT "{self.name}" {self.definition}'


def deferred(conn: Connection, tables: tuple[str, ...] = LOADED) -> list[Deferred]:
    """What a load into ``tables`` sets aside, in the order to rebuild it.

    Unique constraints and plain indexes first, foreign keys last: a foreign
    key is validated by a join that the rebuilt indexes may serve.
    """
    rows = [
        Deferred(*row)
        for sql in (_CONSTRAINTS, _INDEXES)
        for row in conn.execute(text(sql), {"tables": list(tables)})
    ]
    return sorted(rows, key=lambda d: d.kind == "f")


def schema_of(conn: Connection, tables: tuple[str, ...] = LOADED) -> set[Deferred]:
    """Every index and constraint of ``tables`` (primary keys too), to compare."""
    pks = conn.execute(
        text(_CONSTRAINTS.replace("IN ('u', 'f')", "= 'p'")), {"tables": list(tables)}
    )
    return set(deferred(conn, tables)) | {Deferred(*row) for row in pks}


@contextmanager
def bulk_load(conn: Connection, bulk: bool, timings: dict[str, float]) -> Iterator[None]:
    """Around a load on ``conn`` (one transaction): set the loaded tables' indexes
    and constraints aside if ``bulk`` (Postgres), rebuild them after; ANALYZE.

    ``timings`` gets the seconds each rebuild took, by name. SQLite keeps its
    indexes: its messages reach the search tables after the commit, from the
    search backlog, as a serving process drains it.
    """
    aside = deferred(conn) if bulk and conn.dialect.name == "postgresql" else []
    for item in reversed(aside):  # foreign keys first: nothing may depend on what goes
        conn.execute(text(item.drop()))
    yield
    if aside:
        # One sort per index in memory instead of spilling to disk (the machine has RAM).
        conn.execute(text("SET LOCAL maintenance_work_mem = '1GB'"))
    for item in aside:
        started = time.perf_counter()
        conn.execute(text(item.create()))
        timings[f"rebuild {item.name}"] = time.perf_counter() - started
    started = time.perf_counter()
    conn.execute(text("ANALYZE"))
    timings["analyze"] = time.perf_counter() - started


def settle(engine: Engine, timings: dict[str, float]) -> None:
    """After a committed bulk load: VACUUM the loaded tables, then a CHECKPOINT.

    A service's tables are vacuumed by autovacuum long before they are this
    big; without it the first reads after the load would set hint bits and
    find no visibility map, and the checkpoint would write the load out in
    the middle of a measurement.
    """
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        started = time.perf_counter()
        conn.execute(text(f"VACUUM (ANALYZE) {', '.join(LOADED)}"))
        timings["vacuum"] = time.perf_counter() - started
        may = conn.execute(
            text(
                "SELECT rolsuper OR pg_has_role(current_user, 'pg_checkpoint', 'MEMBER') "
                "FROM pg_roles WHERE rolname = current_user"
            )
        ).scalar_one()
        if may:
            started = time.perf_counter()
            conn.execute(text("CHECKPOINT"))
            timings["checkpoint"] = time.perf_counter() - started

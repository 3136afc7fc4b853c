"""Every hot statement compiles for Postgres's driver before any request runs it.

``compile_all`` runs as a process starts (``Database.compile_statements``):
a statement the driver cannot run as it is (an ``IN`` list expanded at
execution, an ``onupdate`` value) fails here, not in the first request.
"""

from __future__ import annotations

from sqlalchemy.dialects.postgresql import psycopg as postgres_psycopg
from sqlalchemy.dialects.sqlite import pysqlite

import api.app  # noqa: F401  (imports every repository the API runs)
import workers.tasks.compaction  # noqa: F401  (and every one a worker runs)
from lcm.db.driver import compile_all


def test_every_statement_the_processes_build_compiles_for_postgres() -> None:
    dialect = postgres_psycopg.dialect()
    # The key lookup, conversation and counter statements, the debt row's,
    # the claims, the window, the context reads and a pass's writes.
    assert compile_all(dialect) >= 30


def test_other_databases_have_nothing_to_compile() -> None:
    assert compile_all(pysqlite.dialect()) == 0

"""Server-side prepared statements: psycopg's by default, none with ``db_prepared_statements`` off.

Off is for a pooler in transaction mode that does not track them (PgBouncer
before 1.22): a statement prepared in one server session is then run by
name in another, where it is missing or is another client's statement.
Here the check is on Postgres itself: what the serving connection leaves
prepared in its session after the hot statements have run often enough.
"""

from __future__ import annotations

import pytest
from sqlalchemy import select, text

from lcm.context_store.repository import load_context
from lcm.db.engine import Database
from lcm.db.models import Tenant
from tests.conftest import settings_for

RUNS = 8  # psycopg prepares a statement on its fifth run on a connection


def prepared_in_session(db: Database) -> list[str]:
    """The statements prepared in the pool's one connection's server session."""
    with db.lookup_session() as session:
        return list(session.scalars(text("SELECT statement FROM pg_prepared_statements")))


@pytest.mark.parametrize("prepared", [True, False])
def test_hot_statements_are_prepared_unless_turned_off(pg_db: Database, prepared: bool) -> None:
    db = Database(
        settings_for(pg_db.settings.database_url, db_pool_size=1, db_prepared_statements=prepared)
    )
    try:
        for _ in range(RUNS):
            with db.lookup_session() as session:
                load_context(session, -1)  # a driver statement (lcm/db/driver.py)
            with db.transaction() as session:
                session.scalars(select(Tenant.id).where(Tenant.name == "nobody")).all()
        statements = prepared_in_session(db)
        if prepared:
            assert any("FROM context_items" in s for s in statements), statements
            assert any("FROM tenants" in s for s in statements), statements
        else:
            assert statements == []
    finally:
        db.dispose()

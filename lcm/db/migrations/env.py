"""Alembic environment: online migrations against the configured URL."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, pool

from lcm.db.engine import postgres_connect_args
from lcm.db.models import Base
from lcm.db.search_objects import include_name

config = context.config
target_metadata = Base.metadata


def run_migrations_online() -> None:
    url = config.get_main_option("sqlalchemy.url")
    assert url, "sqlalchemy.url must be set by lcm.db.migrate"
    # A migration runs each statement a few times at most: nothing is worth
    # preparing, and a statement left prepared in a pooler's server session
    # (see postgres_connect_args) would collide with a client's later on.
    connect_args = postgres_connect_args(False) if url.startswith("postgresql") else {}
    engine = create_engine(url, poolclass=pool.NullPool, connect_args=connect_args)
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            # SQLite cannot ALTER most things in place; batch mode copies tables.
            render_as_batch=connection.dialect.name == "sqlite",
            compare_type=True,
            # Search columns, indexes and FTS5 tables are migration-only (0002).
            include_name=include_name,
        )
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline migrations are not supported; run `lcm db upgrade`")
run_migrations_online()

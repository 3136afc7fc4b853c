"""The Postgres a benchmark measures: ``LCM_BENCH_DATABASE_URL`` or a private embedded one."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

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


@contextmanager
def postgres() -> Iterator[str]:
    """Yield the URL of an empty, migrated database; drop it afterwards."""
    from lcm.db.migrate import upgrade

    workdir = servers.make_workdir()
    try:
        with durable_postgres(workdir) as handle:
            upgrade(handle.url)
            yield handle.url
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

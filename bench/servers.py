"""The Postgres a benchmark measures: ``LCM_BENCH_DATABASE_URL`` or a private embedded one."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager

from tests import servers


@contextmanager
def postgres() -> Iterator[str]:
    """Yield the URL of an empty, migrated database; drop it afterwards."""
    from lcm.db.migrate import upgrade

    workdir = servers.make_workdir()
    saved = os.environ.get("LCM_TEST_DATABASE_URL")
    if os.environ.get("LCM_BENCH_DATABASE_URL"):
        os.environ["LCM_TEST_DATABASE_URL"] = os.environ["LCM_BENCH_DATABASE_URL"]
    try:
        # The benchmark keeps Postgres's durable defaults (fsync on).
        handle = servers.start_postgres(workdir, fast=False)
        upgrade(handle.url)
        yield handle.url
        handle.drop()
    finally:
        if saved is None:
            os.environ.pop("LCM_TEST_DATABASE_URL", None)
        else:
            os.environ["LCM_TEST_DATABASE_URL"] = saved
        shutil.rmtree(workdir, ignore_errors=True)

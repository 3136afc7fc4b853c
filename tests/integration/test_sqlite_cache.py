"""``LCM_SQLITE_CACHE_MB`` sizes every SQLite connection's page cache, readers' and writers'."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from lcm.db.engine import Database
from tests.conftest import settings_for


@pytest.mark.parametrize(("cache_mb", "expected"), [(32, -32 * 1024), (5, -5 * 1024), (0, -2000)])
def test_each_connection_gets_the_configured_cache(
    tmp_path: Path, cache_mb: int, expected: int
) -> None:
    database = Database(settings_for(f"sqlite:///{tmp_path / 'c.db'}", sqlite_cache_mb=cache_mb))
    try:
        with database.transaction() as session:
            assert session.execute(text("PRAGMA cache_size")).scalar() == expected
        with database.read_session() as session:
            assert session.execute(text("PRAGMA cache_size")).scalar() == expected
    finally:
        database.dispose()

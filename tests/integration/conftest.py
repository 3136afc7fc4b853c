"""Fixtures shared by the integration tests (the root ``tests/conftest.py`` has the rest)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from lcm.db.engine import Database
from tests.conftest import RecordingSender, api_client


@pytest.fixture(params=["sqlite", "postgres"])
def sdb(request: pytest.FixtureRequest, sender: RecordingSender) -> Iterator[Database]:
    """A database whose deployment has semantic recall on (``LCM_SEMANTIC=on``), on
    each database in turn; the jobs it sends are recorded by the test's ``sender``."""
    base: Database = request.getfixturevalue("sqlite_db" if request.param == "sqlite" else "pg_db")
    database = Database(base.settings.model_copy(update={"semantic": True}), sender)
    yield database
    database.dispose()


@pytest.fixture
def sclient(sdb: Database, sender: RecordingSender) -> Iterator[TestClient]:
    """The API over ``sdb``, its broker the same recorder."""
    yield from api_client(sdb.settings, sdb, sender)

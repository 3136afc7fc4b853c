"""Shared fixtures: real Postgres, real Redis, SQLite, tenants, an API client.

Servers are started once per test session (see ``tests/servers.py``). Each
test gets a clean database: a fresh copy of a migrated SQLite file, or the
Postgres test database with every table truncated after the test. In CI
(``CI`` set) a server that cannot start fails the run; locally it skips.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy import text

from lcm.db.engine import Database
from lcm.db.migrate import upgrade
from lcm.db.models import Base
from lcm.outbox import Job, SummarizeFile, WakeCompaction
from lcm.settings import Settings
from lcm.tenants.service import IssuedKey, create_tenant
from tests import servers
from tests.fakes import FakeAnthropicServer

IN_CI = bool(os.environ.get("CI"))


def _unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"required test server unavailable in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session", autouse=True)
def no_real_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """No test writes into the user's ``~/.lcm``: ``LCM_HOME`` (the default of the
    database, files and every other path) points at a temporary directory for the
    whole run, in this process and in the servers and workers tests start.

    Not a before/after comparison of ``~/.lcm``: a real ``lcm serve`` of the same
    user may write there meanwhile.
    """
    home = tmp_path_factory.mktemp("home") / ".lcm"
    previous = os.environ.get("LCM_HOME")
    os.environ["LCM_HOME"] = str(home)
    yield home
    if previous is None:
        os.environ.pop("LCM_HOME", None)
    else:
        os.environ["LCM_HOME"] = previous


@pytest.fixture(scope="session")
def workdir() -> Iterator[Path]:
    path = servers.make_workdir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_server(workdir: Path) -> Iterator[servers.PostgresHandle]:
    try:
        handle = servers.start_postgres(workdir)
    except servers.ServerUnavailable as exc:
        _unavailable(str(exc))
        raise
    upgrade(handle.url)
    yield handle
    handle.drop()
    handle.stop()  # before ``workdir`` (its data directory's parent) is removed


@pytest.fixture(scope="session")
def redis_server(workdir: Path) -> Iterator[servers.RedisHandle]:
    try:
        handle = servers.start_redis(workdir)
    except servers.ServerUnavailable as exc:
        _unavailable(str(exc))
        raise
    yield handle
    from workers.completions import stop_relay

    stop_relay()  # before Redis goes: the relay would log its lost connection after the summary
    handle.stop()


@pytest.fixture(scope="session")
def sqlite_template(workdir: Path) -> Path:
    path = workdir / "template.db"
    upgrade(f"sqlite:///{path}")
    return path


def settings_for(database_url: str, **overrides: Any) -> Settings:
    return Settings(
        database_url=database_url,
        broker_url="memory://",
        result_backend_url="cache+memory://",
        **overrides,
    )


def truncate_all(database: Database) -> None:
    tables = ", ".join(t.name for t in Base.metadata.sorted_tables)
    with database.engine.begin() as conn:
        # Ids go on from where they were, as in production: worker and API
        # processes that outlive a test keep message views by id
        # (lcm/message_cache.py), which a restarted sequence would make lie.
        conn.execute(text(f"TRUNCATE {tables} CASCADE"))


@pytest.fixture
def sqlite_db(tmp_path: Path, sqlite_template: Path) -> Iterator[Database]:
    path = tmp_path / "lcm.db"
    shutil.copyfile(sqlite_template, path)
    database = Database(settings_for(f"sqlite:///{path}"))
    yield database
    database.dispose()


@pytest.fixture
def pg_db(pg_server: servers.PostgresHandle) -> Iterator[Database]:
    database = Database(settings_for(pg_server.url))
    yield database
    truncate_all(database)
    database.dispose()


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest) -> Database:
    """The same test on the embedded default and on Postgres."""
    fixture = "sqlite_db" if request.param == "sqlite" else "pg_db"
    database: Database = request.getfixturevalue(fixture)
    return database


def new_tenant(database: Database, name: str = "acme") -> IssuedKey:
    with database.session() as session:
        issued = create_tenant(session, name)
        session.commit()
    return issued


@pytest.fixture
def tenant(db: Database) -> IssuedKey:
    return new_tenant(db)


class RecordingSender:
    """Stands in for the broker in HTTP tests that run no worker: records the jobs sent."""

    def __init__(self) -> None:
        self.jobs: list[Job] = []

    def send(self, jobs: Sequence[Job]) -> None:
        self.jobs.extend(jobs)

    @property
    def woken(self) -> list[int]:
        return [j.conversation_id for j in self.jobs if isinstance(j, WakeCompaction)]

    @property
    def files(self) -> list[str]:
        return [j.file_id for j in self.jobs if isinstance(j, SummarizeFile)]


@pytest.fixture
def sender() -> RecordingSender:
    return RecordingSender()


def api_client(
    settings: Settings, database: Database, sender: RecordingSender
) -> Iterator[TestClient]:
    """The API app over ``database``, its broker a recorder, in a test client."""
    from api.app import create_app
    from workers.link import CeleryLink

    app = create_app(
        settings, link=CeleryLink(), database=database, broker_ping=lambda: True, sender=sender
    )
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


@pytest.fixture
def client(db: Database, sender: RecordingSender) -> Iterator[TestClient]:
    yield from api_client(db.settings, db, sender)


@pytest.fixture
def pg_client(pg_db: Database) -> Iterator[TestClient]:
    """The API on the test Postgres (``client`` runs on both databases)."""
    yield from api_client(pg_db.settings, pg_db, RecordingSender())


@pytest.fixture
def llm() -> Iterator[FakeAnthropicServer]:
    """The fake Messages API server (``set_default("500")`` is an outage)."""
    with FakeAnthropicServer() as server:
        yield server


@pytest.fixture
def llm_client(
    db: Database, llm: FakeAnthropicServer, sender: RecordingSender
) -> Iterator[TestClient]:
    """The API with an LLM configured: no SDK retries, a breaker that closes again at once."""
    settings = db.settings.model_copy(
        update={
            "anthropic_api_key": SecretStr("sk-test"),
            "anthropic_base_url": llm.base_url,
            "llm_max_retries": 0,
            "llm_breaker_reset_seconds": 0.01,
        }
    )
    yield from api_client(settings, db, sender)


def auth(issued: IssuedKey) -> dict[str, str]:
    return {"Authorization": f"Bearer {issued.api_key}"}


@pytest.fixture(scope="session")
def worker_env(
    pg_server: servers.PostgresHandle, redis_server: servers.RedisHandle, workdir: Path
) -> dict[str, str]:
    """Environment for a real worker process: the test Postgres and Redis."""
    return {
        "LCM_DATABASE_URL": pg_server.url,
        "LCM_BROKER_URL": redis_server.url,
        "LCM_RESULT_BACKEND_URL": redis_server.url,
        # Large files written by a test are read by the worker from here.
        "LCM_FILES_DIR": str(workdir / "files"),
        # A line per job in the worker's log: what a failing test shows, and
        # how a test sees that a job whose result is not stored has run.
        "LCM_LOG_JOBS": "true",
    }


@pytest.fixture(scope="session")
def celery_app(worker_env: dict[str, str]) -> object:
    """This process's Celery app, pointed at the test Redis (to send tasks to real workers)."""
    from workers.bootstrap import bootstrap

    return bootstrap(
        Settings(
            database_url=worker_env["LCM_DATABASE_URL"],
            broker_url=worker_env["LCM_BROKER_URL"],
            result_backend_url=worker_env["LCM_RESULT_BACKEND_URL"],
        )
    )


@pytest.fixture(scope="module")
def celery_worker(
    celery_app: object, worker_env: dict[str, str], workdir: Path
) -> Iterator[object]:
    """A real ``celery worker`` process with default settings, for one test module.

    Module-scoped so that modules which start workers with settings of their
    own never share the queues with it.
    """
    from workers.tasks.system import ping

    log = workdir / "worker-default.log"
    process = servers.start_celery_worker(worker_env, log=log)
    try:
        ping.apply_async(queue="compaction").get(timeout=60)
    except Exception:
        process.kill()
        pytest.fail("the Celery worker did not answer a ping:\n" + log.read_text()[-4000:])
    yield celery_app
    servers.stop_process(process)

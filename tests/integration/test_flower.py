"""Flower behind basic auth: a real ``lcm flower`` process watching a real worker."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import servers
from workers.tasks.compaction import leaf
from workers.tasks.system import ping

pytestmark = pytest.mark.celery

CREDENTIALS = ("operator", "s3cret-flower")


@pytest.fixture(scope="module")
def flower(celery_worker: Any, worker_env: dict[str, str], workdir: Path) -> Iterator[str]:
    """``lcm flower`` on a free port with basic auth from the settings; its base URL."""
    port = servers.free_port()
    log = workdir / "flower.log"
    env = {**os.environ, **worker_env, "LCM_FLOWER_BASIC_AUTH": ":".join(CREDENTIALS)}
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cli.main",
                "flower",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/healthcheck", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail("Flower did not start:\n" + log.read_text()[-3000:])
            time.sleep(0.2)
        yield base
    finally:
        servers.stop_process(process)


def tasks_seen(base: str) -> dict[str, dict[str, Any]]:
    r = httpx.get(f"{base}/api/tasks", auth=CREDENTIALS, timeout=10)
    assert r.status_code == 200, r.text
    found: dict[str, dict[str, Any]] = r.json()
    return found


def test_flower_lists_the_projects_tasks_to_its_operator_only(flower: str) -> None:
    # Flower sees the events of jobs run after it subscribed: send jobs until
    # both kinds show up (the first may precede its event consumer).
    deadline = time.monotonic() + 60
    names: set[str] = set()
    # A pass job stores no result (nothing reads it), so its end is seen in
    # Flower's own view of the events, not through ``.get()``.
    while not {"system.ping", "compaction.leaf"} <= names:
        assert time.monotonic() < deadline, f"Flower listed only {names}"
        leaf.apply_async(args=[987_654_321], queue="compaction")
        ping.apply_async(queue="compaction").get(timeout=30)
        time.sleep(0.5)
        names = {t["name"] for t in tasks_seen(flower).values() if t.get("state") == "SUCCESS"}

    shown = [t for t in tasks_seen(flower).values() if t.get("name") == "compaction.leaf"]
    assert any(t["state"] == "SUCCESS" for t in shown)
    assert shown[0]["args"] == "[987654321]"

    for path in ("/api/tasks", "/api/workers", "/"):
        assert httpx.get(f"{flower}{path}", timeout=10).status_code == 401
        wrong = httpx.get(f"{flower}{path}", auth=("operator", "guess"), timeout=10)
        assert wrong.status_code == 401


def test_lcm_flower_refuses_to_start_without_auth(worker_env: dict[str, str]) -> None:
    done = servers.run_lcm("flower", "--port", "1", env={**worker_env, "LCM_FLOWER_BASIC_AUTH": ""})
    assert done.returncode == 2
    assert "LCM_FLOWER_BASIC_AUTH" in done.stdout + done.stderr

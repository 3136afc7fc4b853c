"""``lcm worker`` sends Celery's task events only once a monitor asks for them.

The events are Redis PUBLISHes of each task's states (received, started,
succeeded): 1-2 ms of a worker's CPU per job (CHANGELOG.md). Flower switches them on
over the control channel when it starts (``test_flower``); until then a
worker started the way operators start it must not pay for them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import servers
from tests.integration.test_task_payloads import BrokerTraffic, base64_decoded
from workers.tasks.system import ping

pytestmark = pytest.mark.celery


@pytest.fixture
def lcm_worker(celery_app: Any, worker_env: dict[str, str], workdir: Path) -> Iterator[Path]:
    """``lcm worker`` as an operator starts it (no other worker runs in this module)."""
    log = workdir / "lcm-worker-events.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "worker", "--concurrency", "2"],
            env={**os.environ, **worker_env},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        ping.apply_async(queue="compaction").get(timeout=60)
        yield log
    finally:
        servers.stop_process(process)


def task_events(url: str) -> str:
    """The task events published while one ping job runs, decoded (batched as ``task.multi``)."""
    traffic = BrokerTraffic(url)
    try:
        ping.apply_async(queue="compaction").get(timeout=30)
        time.sleep(0.5)  # the "succeeded" event follows the result
    finally:
        traffic.stop()
    published = [c for c in traffic.commands if c.startswith("PUBLISH") and "celeryev/task" in c]
    return "\n".join(base64_decoded(c) for c in published)


def test_lcm_worker_sends_task_events_only_once_a_monitor_asks(
    lcm_worker: Path, celery_app: Any, redis_server: servers.RedisHandle
) -> None:
    assert task_events(redis_server.url) == ""
    celery_app.control.enable_events()  # what Flower broadcasts when it starts
    deadline = time.monotonic() + 30
    while '"task-succeeded"' not in task_events(redis_server.url):
        assert time.monotonic() < deadline, lcm_worker.read_text()[-3000:]

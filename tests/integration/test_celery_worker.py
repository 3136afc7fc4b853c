"""A real Celery worker process, a real Redis broker, a real Postgres."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import redis

from workers.celery_app import QUEUES, app
from workers.tasks.compaction import condense, leaf, repair
from workers.tasks.system import ping


def test_round_trip_on_every_queue(celery_worker: Any) -> None:
    for queue in QUEUES:
        result = ping.apply_async(queue=queue).get(timeout=30)
        assert result["database"] == "postgresql"


def test_production_settings() -> None:
    conf = app.conf
    assert conf.task_acks_late is True
    assert conf.task_reject_on_worker_lost is True
    assert conf.worker_prefetch_multiplier == 1
    # Off until a monitor (Flower) switches them on: test_flower shows it does.
    assert conf.worker_send_task_events is False
    assert {q.name for q in conf.task_queues} == set(QUEUES)
    assert app.amqp.router.route({}, "compaction.leaf")["queue"].name == "compaction"
    assert app.amqp.router.route({}, "files.summarize")["queue"].name == "files"
    assert app.amqp.router.route({}, "expansion.query")["queue"].name == "expansion"


def test_pass_jobs_store_no_result(
    celery_worker: Any, worker_env: dict[str, str], workdir: Path
) -> None:
    """A pass job's return value stays in the worker's log, not in the result backend."""
    assert all(task.ignore_result for task in (leaf, condense, repair))
    sent = leaf.apply_async(args=[987_654_320], queue="compaction")
    answered = ping.apply_async(queue="compaction")
    answered.get(timeout=30)
    log = workdir / "worker-default.log"
    deadline = time.monotonic() + 30
    while f"compaction.leaf[{sent.id}] succeeded" not in log.read_text(errors="replace"):
        assert time.monotonic() < deadline, "the pass job did not run"
        time.sleep(0.1)
    backend = redis.Redis.from_url(worker_env["LCM_RESULT_BACKEND_URL"])
    assert backend.exists(f"celery-task-meta-{answered.id}")  # results are stored at all
    assert not backend.exists(f"celery-task-meta-{sent.id}")

"""A real Celery worker process, a real Redis broker, a real Postgres."""

from __future__ import annotations

from typing import Any

from workers.celery_app import QUEUES, app
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
    assert conf.worker_send_task_events is True
    assert {q.name for q in conf.task_queues} == set(QUEUES)
    assert app.amqp.router.route({}, "compaction.leaf")["queue"].name == "compaction"
    assert app.amqp.router.route({}, "files.summarize")["queue"].name == "files"
    assert app.amqp.router.route({}, "expansion.query")["queue"].name == "expansion"

"""Operational tasks: a round trip that proves broker, worker and database."""

from __future__ import annotations

import socket

from lcm.job_types import PING
from workers import runtime
from workers.celery_app import app


@app.task(name=PING.name)
def ping() -> dict[str, str]:
    """Answer with the worker's host and the database it reaches."""
    database = runtime.database()
    database.ping()
    return {"host": socket.gethostname(), "database": database.dialect}

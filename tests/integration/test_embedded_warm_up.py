"""``lcm serve``'s in-process worker builds its job runner at start, as a worker does when ready.

Its ready callback replaces Celery's, which sends ``worker_ready`` (the
signal a standalone worker warms up on). Without the warm-up, the first
wake-ups of a busy ``lcm serve`` built the summarizer themselves (the LLM
SDK's import, seconds on a core the API keeps busy) while every other one
waited for it: under a gateway's load no compaction pass reached the model
for the first 20 s.
"""

from __future__ import annotations

from typing import Any

import pytest

from lcm.db.engine import Database
from lcm.services import Services
from workers.embedded import EmbeddedWorker


def test_the_embedded_worker_builds_its_job_runner_before_it_reports_started(
    sqlite_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[str] = []
    real = Services.compaction_jobs

    def recording(self: Services, role: str = "worker") -> Any:
        built.append(role)
        return real(self, role)

    monkeypatch.setattr(Services, "compaction_jobs", recording)
    services = Services.build(sqlite_db.settings, database=sqlite_db)
    worker = EmbeddedWorker(services)
    worker.start()
    try:
        # Before any task ran: the start itself built it.
        assert built == ["worker"]
    finally:
        worker.stop()

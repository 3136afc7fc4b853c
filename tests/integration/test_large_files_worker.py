"""``files.summarize`` on a real Celery worker process, real Redis, real Postgres."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from sqlalchemy import select

from lcm.content import IncomingMessage
from lcm.db.engine import Database
from lcm.db.models import LargeFile
from lcm.files.extraction import LargeFileExtractor
from lcm.files.storage import LocalFileStorage
from lcm.ingest.service import ingest_messages, prepare_batch
from tests.conftest import new_tenant


def test_the_worker_writes_the_exploration_summary(
    celery_worker: Any, pg_db: Database, worker_env: dict[str, str]
) -> None:
    from workers.sender import summarize_files

    tenant = new_tenant(pg_db)
    csv = "sku,qty,warehouse\n" + "\n".join(
        f"A{i},{i % 50},{'north' if i % 3 else 'south'}" for i in range(9_000)
    )
    storage = LocalFileStorage(Path(worker_env["LCM_FILES_DIR"]))
    batch = prepare_batch(
        [IncomingMessage("user", f'<file name="stock.csv">{csv}</file>')],
        max_batch=1,
        max_chars=10**6,
    )
    with pg_db.transaction() as session:
        result = ingest_messages(
            session,
            tenant.tenant_id,
            "k",
            None,
            batch,
            large_files=LargeFileExtractor(storage, 25_000),
        )
    assert len(result.file_ids) == 1
    assert summarize_files(result.file_ids) == 1

    deadline = time.monotonic() + 30
    summary = None
    while summary is None and time.monotonic() < deadline:
        with pg_db.session() as s:
            summary = s.scalars(select(LargeFile.exploration_summary)).one()
        time.sleep(0.1)
    assert summary is not None, "the worker wrote no exploration summary"
    assert summary.startswith("Table (comma-separated): 9,000 rows x 3 columns.")
    assert "qty (integer 0..49)" in summary
    # A duplicate delivery is a no-op.
    again = celery_worker.send_task("files.summarize", args=[result.file_ids[0]], queue="files")
    assert again.get(timeout=30) == "skipped"

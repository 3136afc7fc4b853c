"""Semantic recall with a real Celery worker process, real Redis and real Postgres:
the ingest's commit sends the embed job, the worker embeds, grep finds by meaning."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from lcm.content import IncomingMessage
from lcm.db.engine import Database
from lcm.db.models import Embedding
from lcm.ingest.service import ingest_messages, prepare_batch
from lcm.retrieval.grep import GrepLimits, GrepQuery, grep
from lcm.retrieval.scope import ScopeSelector, resolve_bounds
from lcm.retrieval.semantic_grep import SemanticOptions
from tests import servers
from tests.conftest import new_tenant

CAR = "My car would not start this morning, the battery was completely dead."
OTHER = ["We adopted a kitten from the shelter.", "The budget review moved to Thursday."]


@pytest.fixture(scope="module")
def semantic_worker(celery_app: Any, worker_env: dict[str, str], workdir: Path) -> Iterator[Any]:
    """A worker of a deployment with ``LCM_SEMANTIC=on``."""
    from workers.tasks.system import ping

    log = workdir / "worker-semantic.log"
    process = servers.start_celery_worker(
        {**worker_env, "LCM_SEMANTIC": "on"}, hostname="semantic", log=log
    )
    try:
        ping.apply_async(queue="compaction").get(timeout=60)
    except Exception:
        process.kill()
        pytest.fail("the Celery worker did not answer a ping:\n" + log.read_text()[-4000:])
    yield celery_app
    servers.stop_process(process)


def test_the_worker_embeds_after_the_ingest_commits(semantic_worker: Any, pg_db: Database) -> None:
    from workers.sender import CelerySender

    db = Database(pg_db.settings.model_copy(update={"semantic": True}), CelerySender())
    try:
        tenant = new_tenant(db)
        batch = prepare_batch(
            [IncomingMessage("user", text, None) for text in [CAR, *OTHER]],
            max_batch=10,
            max_chars=10**6,
        )
        with db.transaction() as session:
            ingest_messages(session, tenant.tenant_id, "agent:main", None, batch)
        deadline = time.monotonic() + 60
        count = 0
        while count < 3 and time.monotonic() < deadline:
            with db.read_session() as session:
                count = int(session.scalar(select(func.count()).select_from(Embedding)) or 0)
            time.sleep(0.2)
        assert count == 3, "the worker embedded nothing"
        limits = GrepLimits(5_000, 1_000, 168.0, SemanticOptions(True, "both"))
        with db.read_session() as session:
            bounds = resolve_bounds(
                session, tenant.tenant_id, ScopeSelector(all_conversations=True)
            )
            found = grep(
                session,
                bounds,
                GrepQuery("vehicle failed to turn over", "semantic", "messages", "relevance", 1),
                limits,
            )
        assert [m.snippet for m in found.matches] == [CAR]
    finally:
        db.dispose()

"""``lcm serve`` indexes for search after commit: each batch, and what a crash left behind.

Real processes: messages committed into the SQLite file with their indexing
never run (a crash between an ingest's commit and its job) are indexed when
``lcm serve`` starts (embedded beat's first run); a batch posted to the
running server is indexed by the in-process worker's job, sent after the
request committed.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from lcm.db.engine import Database
from lcm.tenants.repository import TenantRepository
from tests import servers
from tests.conftest import settings_for
from tests.integration.retrieval_data import ingest
from tests.integration.test_search_backlog import backlog, index_is_sound


def wait_for_empty_backlog(database: Database, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while (left := backlog(database)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def test_serve_indexes_a_crashs_backlog_at_start_and_each_batch_after_commit(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    url, key = servers.embedded_home(home, "acme")
    database = Database(settings_for(url))
    try:
        with database.session() as s:
            tenant = TenantRepository(s).find_by_name("acme")
            assert tenant is not None
            tenant_id = tenant.id
        left_by_a_crash = [f"before the crash {i} platypus" for i in range(300)]
        ingest(database, tenant_id, "agent:main", left_by_a_crash, index=False)
        assert backlog(database) == 300
        # Only the run at start can index it within the wait below.
        env = {"LCM_HOME": str(home), "LCM_SEARCH_BACKLOG_INTERVAL_SECONDS": "3600"}
        serve = servers.start_serve(env, log=tmp_path / "serve.log")
        try:
            assert wait_for_empty_backlog(database, 60) == 0
            headers = {"Authorization": f"Bearer {key}"}
            batch = [
                {"role": "user", "content": f"after the start {i} echidna", "id": f"n{i}"}
                for i in range(500)
            ]
            r = httpx.post(
                f"{serve.base_url}/v1/conversations/agent:main/messages",
                headers=headers,
                json={"messages": batch},
                timeout=60,
            )
            assert r.status_code == 200, r.text
            assert wait_for_empty_backlog(database, 60) == 0
            found = httpx.post(
                f"{serve.base_url}/v1/grep",
                headers=headers,
                json={
                    "pattern": "echidna",
                    "mode": "full_text",
                    "scope": "messages",
                    "session_key": "agent:main",
                    "limit": 200,
                },
                timeout=60,
            )
            assert found.status_code == 200, found.text
            assert len(found.json()["matches"]) == 200
        finally:
            serve.stop()
        assert index_is_sound(database)
    finally:
        database.dispose()

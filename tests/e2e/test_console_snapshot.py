"""The console's conversation page reads one snapshot: a pass committing mid-page changes nothing.

The page is assembly for a budget, the context's token split, the summary
DAG and the compaction runs: several reads. At READ COMMITTED a compaction
pass committing between them would show the window of one moment next to
the DAG and runs of another. Here a pass commits right after the page's
first statements, before it reads the context, from inside the request.
"""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import event

from lcm.db.engine import Database
from tests.conftest import new_tenant
from tests.e2e.test_console import login_token
from tests.integration.retrieval_data import compact, ingest
from tests.integration.test_message_cache import history


def signed_in(client: TestClient, api_key: str) -> None:
    token = login_token(client.get("/console/login").text)
    done = client.post(
        "/console/login",
        data={"api_key": api_key, "login_token": token},
        follow_redirects=False,
    )
    assert done.status_code == 303, done.text


def test_a_pass_committing_mid_page_changes_nothing_on_it(
    pg_db: Database, pg_client: TestClient
) -> None:
    tenant = new_tenant(pg_db)
    cid = ingest(pg_db, tenant.tenant_id, "agent", history(60, pad=20))
    signed_in(pg_client, tenant.api_key)
    url = f"/console/conversations/{cid}?budget=3000"
    before = pg_client.get(url)
    assert before.status_code == 200, before.text
    armed = {"on": True}

    def compact_mid_page(conn: Any, cursor: Any, statement: str, *args: object) -> None:
        # Before the page's first read of the context, after its first
        # statements (the conversation, the tenant's settings).
        if armed["on"] and "context_items" in statement:
            armed["on"] = False
            compact(pg_db, tenant.tenant_id, cid)  # commits on another connection

    event.listen(pg_db.engine, "before_cursor_execute", compact_mid_page)
    try:
        raced = pg_client.get(url)
    finally:
        event.remove(pg_db.engine, "before_cursor_execute", compact_mid_page)
    assert not armed["on"], "the pass never ran inside the request"
    assert raced.status_code == 200, raced.text
    assert raced.text == before.text  # window, split, DAG and runs: all of one moment
    after = pg_client.get(url)
    assert after.text != before.text  # the pass did commit: the next page shows it

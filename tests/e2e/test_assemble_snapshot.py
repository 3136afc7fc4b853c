"""Assemble reads one snapshot: a compaction committing in the middle of it changes nothing.

Found by ``python -m bench gateway``: under load, ``POST …/assemble`` on
Postgres answered 500 now and then. Assembly reads the context items, then
their messages, in separate statements; under READ COMMITTED a pass
committing between the two had replaced an item's message by a summary, and
the message was not found (the messages were then read through the items;
they are read by id now, tests/integration/test_context_read_races.py).
Here the pass is made to commit at exactly that point, from inside the
request.
"""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import event

from lcm.db.engine import Database
from tests.conftest import auth, new_tenant
from tests.integration.retrieval_data import compact, ingest


def test_a_pass_committing_mid_assemble_does_not_break_it(
    pg_db: Database, pg_client: TestClient
) -> None:
    tenant = new_tenant(pg_db)
    texts = [f"message {i}: deployed build {i} to staging" for i in range(30)]
    cid = ingest(pg_db, tenant.tenant_id, "agent:main", texts)
    armed = {"on": True}

    def compact_before_messages_are_read(
        conn: Any, cursor: Any, statement: str, *args: object
    ) -> None:
        # The first statement of the request that reads messages: the
        # window's, after its items were read.
        reads_messages = "FROM messages" in statement or "JOIN messages" in statement
        if armed["on"] and reads_messages:
            armed["on"] = False
            compact(pg_db, tenant.tenant_id, cid)  # commits on another connection

    event.listen(pg_db.engine, "before_cursor_execute", compact_before_messages_are_read)
    try:
        r = pg_client.post(
            "/v1/conversations/agent:main/assemble",
            json={"token_budget": 100_000},
            headers=auth(tenant),
        )
    finally:
        event.remove(pg_db.engine, "before_cursor_execute", compact_before_messages_are_read)
    assert not armed["on"], "the pass never ran inside the request"
    assert r.status_code == 200, r.text
    # The snapshot the request began with: 30 raw messages, no summary yet.
    assert r.json()["summary_count"] == 0
    assert len(r.json()["messages"]) == 30
    after = pg_client.post(
        "/v1/conversations/agent:main/assemble",
        json={"token_budget": 100_000},
        headers=auth(tenant),
    )
    assert after.json()["summary_count"] > 0


def test_a_body_refused_after_the_key_check_ends_the_snapshot(
    pg_db: Database, pg_client: TestClient
) -> None:
    """The route ends its snapshot itself; when it never runs (a bad body is
    refused after the key check), the dependency must: no connection stays out."""
    tenant = new_tenant(pg_db)
    ingest(pg_db, tenant.tenant_id, "agent", ["hello", "hi there"])
    url = "/v1/conversations/agent/assemble"
    pool = pg_db.engine.pool
    calls = [
        ({"token_budget": -5}, auth(tenant), 400),
        ({"token_budget": "many"}, auth(tenant), 400),
        ({}, auth(tenant), 400),
        ({"token_budget": 1_000}, {"Authorization": "Bearer nope"}, 401),
        ({"token_budget": 1_000}, auth(tenant), 200),
    ]
    for body, headers, status in calls:
        r = pg_client.post(url, json=body, headers=headers)
        assert r.status_code == status, r.text
        assert pool.checkedout() == 0, (body, status)  # type: ignore[attr-defined]
    assert [m["content"][0]["text"] for m in r.json()["messages"]] == ["hello", "hi there"]

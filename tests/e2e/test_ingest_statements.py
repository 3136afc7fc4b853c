"""``POST …/messages`` and ``POST …/turns`` run a small, fixed number of SQL statements.

Each statement is a round trip and, built per call, CPU of the API process:
these pin how many a gateway's steady turn costs, so one more fails here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event, func, select

from lcm.compaction.repository import CompactionRepository
from lcm.db.engine import Database
from lcm.db.models import Summary
from tests.conftest import RecordingSender, auth, new_tenant
from tests.integration.retrieval_data import compact, ingest

# Left out: the API key's read, which the process remembers for
# LCM_KEY_CACHE_SECONDS (lcm/tenants/key_cache.py), so whether a request runs
# it depends on the clock. Counted: the conversation row (locked), the stored client
# ids of the batch, the counters, the messages with their parts and their
# context items (one statement on Postgres, three on SQLite), the tenant's
# storage counters.
MESSAGES_STATEMENTS = {"postgresql": 5, "sqlite": 7}
# The same (the counters statement also reads the context's token total),
# then the tenant's fair-queue flag (a row this transaction already holds,
# for the storage counters) and the debt row (one upsert).
TURNS_STATEMENTS = {"postgresql": 7, "sqlite": 9}


@pytest.fixture
def statements(db: Database) -> Iterator[list[str]]:
    """The SQL statements run while the test runs.

    Not transaction control nor SQLite's PRAGMAs (its read-only switch around
    a read); an executemany that the driver sends row by row (SQLite, for an
    INSERT … RETURNING) is one statement, as it is one batch on Postgres.
    """
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: object) -> None:
        verb = statement.split(None, 1)[0].upper()
        if verb in ("BEGIN", "COMMIT", "ROLLBACK", "PRAGMA") or "FROM api_keys" in statement:
            return
        if not (seen and seen[-1] == statement and args[-1]):  # args[-1]: executemany
            seen.append(statement)

    event.listen(db.engine, "before_cursor_execute", record)
    yield seen
    event.remove(db.engine, "before_cursor_execute", record)


def test_steady_turns_run_a_fixed_number_of_statements(
    db: Database, client: TestClient, sender: RecordingSender, statements: list[str]
) -> None:
    headers = auth(new_tenant(db))
    base = "/v1/conversations/agent:main"
    messages_statements, turns_statements = (
        MESSAGES_STATEMENTS[db.dialect],
        TURNS_STATEMENTS[db.dialect],
    )

    def post(path: str, body: dict[str, Any]) -> list[str]:
        statements.clear()
        r = client.post(f"{base}/{path}", json=body, headers=headers)
        assert r.status_code == 200, r.text
        return list(statements)

    def batch(first: int, count: int) -> list[dict[str, Any]]:
        return [
            {"role": "user", "content": f"deployed build {i} to staging", "id": f"m{i}"}
            for i in range(first, first + count)
        ]

    post("messages", {"messages": batch(0, 5)})  # creates the conversation
    for first in (5, 10):
        seen = post("messages", {"messages": batch(first, 5)})
        assert len(seen) == messages_statements, seen
    # Over the threshold each time: the first turn owes compaction (a wake-up
    # after commit), the later ones coalesce into the pending debt.
    for first in (15, 20, 25):
        seen = post("turns", {"messages": batch(first, 2), "token_budget": 40})
        assert len(seen) == turns_statements, seen
    assert len(sender.woken) == 1
    # Naming a model writes it to the conversation once, not on every turn.
    named = {"token_budget": 40, "model": "claude-sonnet-4-5", "context_window": 200_000}
    remembered = post("turns", {"messages": batch(30, 2), **named})
    assert len(remembered) == turns_statements + 1, remembered
    for start in (32, 34):
        seen = post("turns", {"messages": batch(start, 2), **named})
        assert len(seen) == turns_statements, seen


def test_a_turn_checks_the_whole_stored_context(db: Database, client: TestClient) -> None:
    """The total the turn reports (read with the counters) is the sum of what is stored."""
    tenant = new_tenant(db)
    texts = [f"message {i}: deployed build {i} to staging and ran the checks" for i in range(60)]
    cid = ingest(db, tenant.tenant_id, "k", texts)
    compact(db, tenant.tenant_id, cid)  # summaries in the context, not only messages

    def stored_total() -> int:
        with db.session() as s:
            return CompactionRepository(s).context_token_total(cid)

    batch = [{"role": "assistant", "content": "web-31 is done " * 20, "id": "late-1"}]
    for turn in range(2):  # the second sends the same message: nothing new is counted
        r = client.post(
            "/v1/conversations/k/turns",
            json={"messages": batch, "token_budget": 100_000},
            headers=auth(tenant),
        )
        assert r.status_code == 200, r.text
        assert r.json()["ingested"] == 1 - turn
        assert r.json()["context_tokens"] == stored_total()
    with db.session() as s:
        assert s.scalar(select(func.count()).where(Summary.conversation_id == cid))

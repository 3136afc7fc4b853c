"""``POST …/assemble`` runs a small, fixed number of SQL statements whatever the history's size."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event, select

from api.contract import AssembleOut
from lcm.assembly.service import assemble
from lcm.db.engine import Database
from lcm.db.models import Message
from tests.conftest import auth, new_tenant
from tests.integration.retrieval_data import compact, ingest

# Counted are the assembly's own statements: the API key's read is left out,
# because the process remembers an active key for LCM_KEY_CACHE_SECONDS
# (lcm/tenants/key_cache.py) and whether a request reads it depends on the
# clock. A raw conversation: the conversation, one range of context items,
# the messages. A compacted one adds the summaries and their parents (its
# context here lies within the first range).
RAW_SELECTS = 3
COMPACTED_SELECTS = 5
# The turn after an ingest: the conversation with its stamp (one statement),
# the secret probe, the items appended since the kept window, their
# messages. The window and its assembly are kept under the stamp without
# reading it again: the request's one snapshot cannot show another
# (lcm/window_cache.py).
APPENDED_SELECTS = 4


@pytest.fixture
def selects(db: Database) -> Iterator[list[str]]:
    """The SELECT statements sent to the database while the test runs."""
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: object) -> None:
        if statement.lstrip().upper().startswith("SELECT") and "FROM api_keys" not in statement:
            seen.append(statement)

    event.listen(db.engine, "before_cursor_execute", record)
    yield seen
    event.remove(db.engine, "before_cursor_execute", record)


def assembled_over_http(
    client: TestClient, key: str, tenant: Any, budget: int, selects: list[str], **extra: Any
) -> tuple[dict[str, Any], int]:
    path, body = f"/v1/conversations/{key}/assemble", {"token_budget": budget, **extra}
    # The key gate looks a key up the first time it sees it (api/key_gate.py):
    # counted is the steady state, a key the server has seen.
    client.post(path, json=body, headers=auth(tenant))
    selects.clear()
    r = client.post(path, json=body, headers=auth(tenant))
    assert r.status_code == 200, r.text
    return r.json(), len(selects)


def test_statement_count_does_not_grow_with_the_conversation(
    db: Database, client: TestClient, selects: list[str]
) -> None:
    tenant = new_tenant(db)
    line = "ran the migration and checked the logs "
    counts = {}
    for size in (200, 2_000):
        ingest(db, tenant.tenant_id, f"chat-{size}", [f"{i}: " + line * 3 for i in range(size)])
        body, counts[size] = assembled_over_http(client, f"chat-{size}", tenant, 5_000, selects)
        assert 0 < len(body["messages"]) < 200  # the budget holds only the newest messages
    assert counts[200] == counts[2_000] <= RAW_SELECTS


def test_a_prompt_adds_no_statement_unless_it_has_work(
    db: Database, client: TestClient, selects: list[str]
) -> None:
    """Prompt-aware eviction off (the default), no identifier to recall: the same reads."""
    tenant = new_tenant(db)
    line = "ran the migration and checked the logs "
    ingest(db, tenant.tenant_id, "prompted", [f"{i}: " + line * 3 for i in range(300)])
    plain, count = assembled_over_http(client, "prompted", tenant, 5_000, selects)
    prompt = "Which migration did we run, and what did the logs say?"
    prompted, with_prompt = assembled_over_http(
        client, "prompted", tenant, 5_000, selects, prompt=prompt
    )
    assert (prompted, with_prompt) == (plain, count)
    # An identifier the window lacks is looked up: more reads, the window the same but for it.
    _, recalling = assembled_over_http(
        client, "prompted", tenant, 5_000, selects, prompt="Where is MIGRATION_LOG_DIR?"
    )
    assert recalling > count


def test_statement_count_of_a_compacted_conversation(
    db: Database, client: TestClient, selects: list[str]
) -> None:
    tenant = new_tenant(db)
    texts = [f"message {i}: deployed build {i} to staging and ran the checks" for i in range(80)]
    cid = ingest(db, tenant.tenant_id, "compacted", texts)
    compact(db, tenant.tenant_id, cid)
    body, count = assembled_over_http(client, "compacted", tenant, 200_000, selects)
    assert body["summary_count"] > 0
    assert count <= COMPACTED_SELECTS
    # The body is what the domain assembled, as the response model has it.
    with db.snapshot_session() as session:
        result = assemble(session, cid, 200_000, db.settings)
    assert AssembleOut.model_validate(body) == AssembleOut(
        conversation_id=cid,
        token_budget=200_000,
        messages=result.messages,
        estimated_tokens=result.estimated_tokens,
        summary_count=result.summary_count,
        fresh_tail_count=result.fresh_tail_count,
        fresh_tail_overflow=result.fresh_tail_overflow,
    )


def test_an_unchanged_conversation_is_not_read_again(
    db: Database, client: TestClient, selects: list[str]
) -> None:
    """The window and its assembly are kept while the context stands (lcm/window_cache.py):
    a repeated assembly reads the key, the conversation, its stamp and the secret probe."""
    tenant = new_tenant(db)
    texts = [f"message {i}: deployed build {i} to staging and ran the checks" for i in range(80)]
    cid = ingest(db, tenant.tenant_id, "unchanged", texts)
    compact(db, tenant.tenant_id, cid)
    body, count = assembled_over_http(client, "unchanged", tenant, 200_000, selects)
    assert body["summary_count"] > 0
    assert count <= 4
    assert not [s for s in selects if "FROM messages" in s or "summaries" in s], selects
    ingest(db, tenant.tenant_id, "unchanged", ["one more message"])
    grown, _ = assembled_over_http(client, "unchanged", tenant, 200_000, selects)
    assert grown["messages"][-1]["content"][0]["text"] == "one more message"


def test_a_turn_after_an_ingest_reads_only_the_appended_items(
    db: Database, client: TestClient, selects: list[str]
) -> None:
    """The window kept before the ingest grows by the new items (lcm/window_cache.py):
    one range read from its newest item on, and the new messages by id, nothing older."""
    tenant = new_tenant(db)
    line = "ran the migration and checked the logs "
    cid = ingest(db, tenant.tenant_id, "growing", [f"{i}: " + line * 3 for i in range(2_000)])
    assembled_over_http(client, "growing", tenant, 5_000, selects)
    ingest(db, tenant.tenant_id, "growing", ["one more message", "and its reply"])
    with db.snapshot_session() as session:  # not through the process's message cache
        newest = session.scalars(
            select(Message.id)
            .where(Message.conversation_id == cid)
            .order_by(Message.seq.desc())
            .limit(2)
        ).all()
    messages: list[Any] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, *args: object) -> None:
        if "FROM messages" in statement:
            messages.append(parameters)

    selects.clear()
    event.listen(db.engine, "before_cursor_execute", record)
    try:
        path = "/v1/conversations/growing/assemble"
        r = client.post(path, json={"token_budget": 5_000}, headers=auth(tenant))
    finally:
        event.remove(db.engine, "before_cursor_execute", record)
    assert r.status_code == 200, r.text
    assert r.json()["messages"][-1]["content"][0]["text"] == "and its reply"
    window = [s for s in selects if "FROM context_items LEFT OUTER JOIN summaries" in s]
    assert len(window) == 1
    assert "max(" not in window[0]  # a range from the kept window's newest, not a window
    assert len(messages) == 1
    assert sorted(_ints(messages[0])) == sorted(newest)  # the two new messages, by id
    assert len(selects) == APPENDED_SELECTS, "\n\n".join(selects)
    # Byte for byte what the server answers when it reads the window instead.
    assert db.window_cache is not None
    db.window_cache.forget_conversations([cid])
    read = client.post(path, json={"token_budget": 5_000}, headers=auth(tenant))
    assert read.content == r.content


def _ints(parameters: Any) -> list[int]:
    """The integers among a statement's parameters (an id array on Postgres, a JSON
    array on SQLite)."""
    values = parameters.values() if isinstance(parameters, dict) else parameters
    found: list[int] = []
    for value in values:
        if isinstance(value, str) and value.startswith("["):
            value = json.loads(value)
        if isinstance(value, list | tuple):
            found.extend(v for v in value if isinstance(v, int))
        elif isinstance(value, int):
            found.append(value)
    return found

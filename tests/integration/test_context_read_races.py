"""Context reads that a compaction pass or an erasure commits in the middle of.

At READ COMMITTED (every session but assembly's snapshot) each statement sees
the commits made before it. A context read is several statements: the items
(with their messages or summaries), then the parts of block messages, or the
messages themselves when the process holds no view of them. A compaction
pass committing in between takes messages out of the context; an erasure
deletes them. These tests commit one exactly there and check what the read
returns, and what the process's cache of message views keeps.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import event

from lcm.assembly.repository import AssemblyRepository
from lcm.context import ContextEntry, MessageView
from lcm.context_store.repository import load_context, load_message_views, window_entries
from lcm.db.engine import Database
from lcm.erasure.service import erase_conversation
from lcm.errors import NotFound
from tests.conftest import new_tenant, settings_for
from tests.integration.retrieval_data import compact, ingest
from tests.integration.test_message_cache import history


@pytest.fixture
def process(pg_db: Database) -> Iterator[Database]:
    """Another process's database: its own pool and its own (empty) cache of views."""
    other = Database(settings_for(pg_db.settings.database_url))
    assert other.message_cache is not None
    yield other
    other.dispose()


def messages_of(entries: list[ContextEntry]) -> dict[int, MessageView]:
    return {e.message.id: e.message for e in entries if e.message is not None}


def as_stored(db: Database, ids: list[int]) -> dict[int, MessageView]:
    """The messages as a read by id builds them (no context involved)."""
    with db.read_session() as session:
        return load_message_views(session, ids)


def test_a_window_read_split_by_a_pass_keeps_every_message_whole(
    pg_db: Database, process: Database
) -> None:
    tenant = new_tenant(pg_db)
    cid = ingest(pg_db, tenant.tenant_id, "agent", history(60, pad=20))
    with process.read_session() as session:
        items = AssemblyRepository(session).window(cid, 10_000_000, 5).items
        compact(pg_db, tenant.tenant_id, cid)  # commits between the items and their messages
        entries = window_entries(session, cid, items)
    read = messages_of(entries)
    assert len(read) == 60  # the window was read before the pass: every message in it
    assert sum(1 for m in read.values() if m.content_shape == "blocks") == 20
    assert read == as_stored(pg_db, list(read))


def test_a_context_read_split_by_a_pass_keeps_block_messages_whole(
    pg_db: Database, process: Database
) -> None:
    tenant = new_tenant(pg_db)
    cid = ingest(pg_db, tenant.tenant_id, "agent", history(60, pad=20))
    passes: list[int] = []

    def commit_a_pass(conn: Any, cursor: Any, statement: str, *args: object) -> None:
        # Right after the items were read with their messages, before their parts.
        if not passes and "FROM context_items LEFT OUTER JOIN messages" in statement:
            passes.append(1)
            compact(pg_db, tenant.tenant_id, cid)

    event.listen(process.engine, "after_cursor_execute", commit_a_pass)
    try:
        with process.read_session() as session:
            entries = load_context(session, cid)
    finally:
        event.remove(process.engine, "after_cursor_execute", commit_a_pass)
    assert passes == [1]
    read = messages_of(entries)
    assert len(read) == 60
    assert read == as_stored(pg_db, list(read))
    # What the process kept of that read is whole too: a later read of the
    # compacted context takes the fresh tail's views from its cache.
    with process.read_session() as session:
        later = messages_of(load_context(session, cid))
    assert 0 < len(later) < 60
    assert later == as_stored(pg_db, list(later))


def test_a_window_read_of_a_conversation_erased_meanwhile_is_not_found(
    pg_db: Database, process: Database
) -> None:
    tenant = new_tenant(pg_db)
    cid = ingest(pg_db, tenant.tenant_id, "agent", history(30))
    with process.read_session() as session:
        items = AssemblyRepository(session).window(cid, 10_000_000, 5).items
        with pg_db.transaction() as eraser:
            erase_conversation(eraser, tenant.tenant_id, cid)
        with pytest.raises(NotFound, match="erased"):
            window_entries(session, cid, items)

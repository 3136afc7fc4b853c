"""The process's message views by id: read once, equal to a fresh read, forgotten on erase."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import event

from lcm.assembly.repository import AssemblyRepository
from lcm.context import MessageView
from lcm.context_store.repository import load_context, window_entries
from lcm.db.engine import Database
from lcm.erasure.service import erase_conversation
from lcm.message_cache import MessageCache
from tests.conftest import new_tenant, settings_for
from tests.integration.retrieval_data import compact, ingest


def tool_turn(i: int) -> list[Any]:
    return [
        {"type": "text", "text": f"step {i}: reading the deploy log", "cache_control": {"x": i}},
        {"type": "tool_use", "id": f"call_{i}", "name": "read", "input": {"path": f"/l/{i}"}},
    ]


def history(n: int, pad: int = 0) -> list[str | list[Any]]:
    """Text and tool-call messages; ``pad`` words more per text (enough to condense)."""
    words = " and reran the suite" * pad
    return [
        tool_turn(i) if i % 3 == 1 else f"message {i}: checked build {i}{words}" for i in range(n)
    ]


Read = tuple[str, Any]  # a statement and its parameters


def selects_from(db: Database, table: str) -> Iterator[list[Read]]:
    """The SELECTs reading ``table`` sent while the test runs, with their parameters."""
    seen: list[Read] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, *args: object) -> None:
        if statement.lstrip().upper().startswith("SELECT") and f"FROM {table}" in statement:
            seen.append((statement, parameters))

    event.listen(db.engine, "before_cursor_execute", record)
    yield seen
    event.remove(db.engine, "before_cursor_execute", record)


@pytest.fixture
def part_reads(db: Database) -> Iterator[list[Read]]:
    yield from selects_from(db, "message_parts")


@pytest.fixture
def parent_reads(db: Database) -> Iterator[list[Read]]:
    yield from selects_from(db, "summary_parents")


def read_ids(params: Any) -> list[int]:
    """The ids a read by id was given: one array on Postgres, one JSON array on SQLite."""
    if isinstance(params, dict):
        return sorted(params["ids"])
    [ids] = params
    return sorted(json.loads(ids))


def fresh_read(db: Database, cid: int, from_ordinal: int | None = None) -> list[Any]:
    """The context as a process without cached views reads it."""
    uncached = Database(settings_for(db.settings.database_url, message_cache_size=0))
    try:
        assert uncached.message_cache is None
        with uncached.read_session() as session:
            return load_context(session, cid, from_ordinal)
    finally:
        uncached.dispose()


def test_a_window_read_twice_builds_its_messages_once(db: Database, part_reads: list[Read]) -> None:
    tenant = new_tenant(db)
    cid = ingest(db, tenant.tenant_id, "agent", history(30))
    assert db.message_cache is not None
    with db.read_session() as session:
        first = load_context(session, cid, from_ordinal=10)
    assert len(part_reads) == 1
    assert len(db.message_cache) == 21
    part_reads.clear()
    with db.read_session() as session:
        second = load_context(session, cid, from_ordinal=10)
    assert part_reads == []  # every block message's view came from the cache
    assert second == first == fresh_read(db, cid, 10)
    for a, b in zip(first, second, strict=True):
        assert a.message is b.message  # the same view, not rebuilt


def test_a_longer_window_reads_only_the_messages_not_yet_cached(
    db: Database, part_reads: list[Read]
) -> None:
    tenant = new_tenant(db)
    cid = ingest(db, tenant.tenant_id, "agent", history(30))
    with db.read_session() as session:
        load_context(session, cid, from_ordinal=20)
    part_reads.clear()
    with db.read_session() as session:
        wider = load_context(session, cid)
    # One read by id for the block messages below ordinal 20, none above.
    below = [e.message.id for e in wider[:19] if e.message and e.message.content_shape == "blocks"]
    assert len(below) == 6
    assert [read_ids(params) for _, params in part_reads] == [sorted(below)]
    assert wider == fresh_read(db, cid)
    assert len(wider) == 30


def test_a_compacted_context_reads_the_same_with_and_without_cached_views(
    db: Database,
) -> None:
    tenant = new_tenant(db)
    cid = ingest(db, tenant.tenant_id, "agent", history(40))
    with db.read_session() as session:
        load_context(session, cid)  # every message cached before the compaction
    compact(db, tenant.tenant_id, cid)
    with db.read_session() as session:
        cached = load_context(session, cid)
    assert any(e.is_summary for e in cached)
    assert cached == fresh_read(db, cid)


def test_condensed_summaries_read_their_parents_once(
    db: Database, parent_reads: list[Read]
) -> None:
    tenant = new_tenant(db)
    cid = ingest(db, tenant.tenant_id, "agent", history(60, pad=20))
    compact(db, tenant.tenant_id, cid)
    assert db.message_cache is not None
    db.message_cache.forget_conversations([cid])  # what the compaction's reads cached
    parent_reads.clear()
    with db.read_session() as session:
        first = load_context(session, cid)
    assert any(e.summary is not None and e.summary.parent_ids for e in first)
    assert len(parent_reads) == 1
    parent_reads.clear()
    with db.read_session() as session:
        second = load_context(session, cid)
    assert parent_reads == []  # a summary's parents never change: kept by summary id
    assert second == first == fresh_read(db, cid)


def window_read(db: Database, cid: int, budget: int) -> tuple[list[Any], list[Any]]:
    """Assembly's window as entries, and the same suffix of the context read whole."""
    with db.read_session() as session:
        items = AssemblyRepository(session).window(cid, budget, 5).items
        return window_entries(session, cid, items), load_context(session, cid, items[0].ordinal)


@pytest.mark.parametrize("budget", [300, 2_000, 10_000_000])
def test_window_entries_are_the_context_from_the_window_on(db: Database, budget: int) -> None:
    """Cold, warm, past what was cached, compacted: as a whole read, on both databases."""
    tenant = new_tenant(db)
    cid = ingest(db, tenant.tenant_id, "agent", history(90, pad=20))
    for wider in (budget, budget, budget * 4):  # cold, then warm, then partly cached
        entries, whole = window_read(db, cid, wider)
        assert entries == whole == fresh_read(db, cid, entries[0].ordinal)
    compact(db, tenant.tenant_id, cid)
    for _ in range(2):
        entries, whole = window_read(db, cid, budget)
        assert entries == whole == fresh_read(db, cid, entries[0].ordinal)
    if budget == 10_000_000:  # the whole context: condensed summaries and their parents too
        assert any(e.summary is not None and e.summary.parent_ids for e in entries)


def test_erasing_a_conversation_forgets_its_views(db: Database) -> None:
    tenant = new_tenant(db)
    kept = ingest(db, tenant.tenant_id, "kept", history(5))
    erased = ingest(db, tenant.tenant_id, "erased", history(7))
    cache = db.message_cache
    assert cache is not None
    with db.read_session() as session:
        load_context(session, kept)
        load_context(session, erased)
    assert len(cache) == 12
    with db.transaction() as session:
        erase_conversation(session, tenant.tenant_id, erased)
    assert len(cache) == 5


def view(message_id: int) -> MessageView:
    return MessageView(message_id, message_id, "user", f"m{message_id}", datetime.now(UTC))


def test_the_cache_drops_the_least_recently_used_views_first() -> None:
    cache = MessageCache(3)
    cache.put_many(1, {1: view(1), 2: view(2), 3: view(3)})
    assert set(cache.get_many([1])) == {1}  # 1 is now the most recently used
    cache.put_many(1, {4: view(4)})
    assert set(cache.get_many([1, 2, 3, 4])) == {1, 3, 4}
    cache.forget_conversations([1])
    assert len(cache) == 0


def test_threads_sharing_the_cache_never_see_another_id_s_view() -> None:
    cache = MessageCache(200)
    wrong: list[tuple[int, int]] = []

    def work(offset: int) -> None:
        for round_ in range(200):
            ids = [(offset + round_ + k) % 500 for k in range(20)]
            cache.put_many(offset, {i: view(i) for i in ids})
            wrong.extend((i, v.id) for i, v in cache.get_many(ids).items() if v.id != i)

    threads = [threading.Thread(target=work, args=(n * 100,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []
    assert len(cache) <= 200

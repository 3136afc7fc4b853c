"""The process's assembly windows: read once per context version, never stale, never another's."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import event

from lcm.assembly.repository import AssemblyRepository
from lcm.assembly.service import assemble, read_window
from lcm.context_store.repository import window_entries
from lcm.db.engine import Database
from lcm.erasure.service import erase_conversation
from lcm.settings import CompactionSettings
from lcm.window_cache import CachedWindow, Stamp, WindowCache
from tests.conftest import new_tenant, settings_for
from tests.integration.retrieval_data import compact, ingest

SETTINGS = CompactionSettings(fresh_tail_count=4)
MIN_ITEMS = SETTINGS.fresh_tail_count + 1


def texts(n: int, start: int = 0) -> list[str | list[Any]]:
    return [f"message {i}: checked build {i} and reran the suite" for i in range(start, start + n)]


@pytest.fixture
def window_reads(db: Database) -> Iterator[list[str]]:
    """The window's range reads sent while the test runs."""
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: object) -> None:
        if "FROM context_items LEFT OUTER JOIN summaries" in statement:
            seen.append(statement)

    event.listen(db.engine, "before_cursor_execute", record)
    yield seen
    event.remove(db.engine, "before_cursor_execute", record)


def uncached_assembly(db: Database, cid: int, budget: int) -> list[dict[str, Any]]:
    """What a process without a window cache assembles."""
    fresh = Database(settings_for(db.settings.database_url, window_cache_size=0))
    try:
        assert fresh.window_cache is None
        with fresh.read_session() as session:
            return assemble(session, cid, budget, SETTINGS).messages
    finally:
        fresh.dispose()


def assembled(db: Database, cid: int, budget: int) -> list[dict[str, Any]]:
    with db.snapshot_session() as session:
        return assemble(session, cid, budget, SETTINGS).messages


def direct_window(session: Any, cid: int, budget: int) -> tuple[tuple[Any, ...], bool]:
    """The window read from the database, past any cache, in ``session``'s snapshot."""
    window = AssemblyRepository(session).window(cid, budget, MIN_ITEMS)
    return tuple(window_entries(session, cid, window.items)), window.whole


def test_the_window_is_read_once_per_context_version(db: Database, window_reads: list[str]) -> None:
    tenant = new_tenant(db)
    cid = ingest(db, tenant.tenant_id, "agent", texts(40))
    first = assembled(db, cid, 200)
    assert len(window_reads) == 1
    assert assembled(db, cid, 200) == first == uncached_assembly(db, cid, 200)
    assert len(window_reads) == 1  # the second came from the cache
    assembled(db, cid, 300)  # another budget reads its own window
    assert len(window_reads) == 2


def test_ingest_and_compaction_each_make_the_next_assembly_read_again(
    db: Database, window_reads: list[str]
) -> None:
    tenant = new_tenant(db)
    cid = ingest(db, tenant.tenant_id, "agent", texts(40))
    before = assembled(db, cid, 10_000)
    ingest(db, tenant.tenant_id, "agent", texts(2, start=40))
    grown = assembled(db, cid, 10_000)
    assert grown != before
    assert "message 41" in str(grown[-1])
    assert grown == uncached_assembly(db, cid, 10_000)
    compact(db, tenant.tenant_id, cid)
    compacted = assembled(db, cid, 10_000)
    assert "<summary" in str(compacted)
    assert compacted == uncached_assembly(db, cid, 10_000)
    assert len(window_reads) == 3


def test_a_conversation_erased_by_another_process_is_never_served(db: Database) -> None:
    """On SQLite the next conversation may get the erased one's id and, after as many
    batches, its version: the newest message's id in the stamp still tells them apart."""
    tenant = new_tenant(db)
    cid = ingest(db, tenant.tenant_id, "agent", texts(10))
    secret = assembled(db, cid, 10_000)
    other = Database(db.settings)  # another process: this one's cache is not told
    try:
        with other.transaction() as session:
            erase_conversation(session, tenant.tenant_id, cid)
    finally:
        other.dispose()
    again = ingest(db, tenant.tenant_id, "agent", texts(10, start=100))
    if db.dialect == "sqlite":
        assert again == cid  # the id was given again
    shown = assembled(db, again, 10_000)
    assert shown != secret
    assert "message 100" in str(shown)
    assert shown == uncached_assembly(db, again, 10_000)


def test_a_window_newer_than_its_stamp_is_not_kept(db: Database) -> None:
    """Outside a snapshot (Postgres at READ COMMITTED) an ingest committing between
    the stamp's read and the window's makes the window newer than the stamp: it is
    served to its request but not kept, so a reader whose snapshot predates the
    ingest can never be handed it."""
    tenant = new_tenant(db)
    cid = ingest(db, tenant.tenant_id, "agent", texts(20))
    cache = db.window_cache
    assert cache is not None
    committed: list[int] = []

    def ingest_once(conn: Any, cursor: Any, statement: str, *args: object) -> None:
        if "FROM context_items LEFT OUTER JOIN summaries" in statement and not committed:
            committed.append(0)
            # Another thread, as another request would: this one's connection is busy.
            worker = threading.Thread(
                target=lambda: committed.append(
                    ingest(db, tenant.tenant_id, "agent", texts(1, start=20))
                )
            )
            worker.start()
            worker.join()

    # READ COMMITTED on Postgres (a snapshot per statement), one snapshot on SQLite.
    with db.read_session() as session:
        stamp = AssemblyRepository(session).stamp(cid)
        assert stamp is not None
        event.listen(db.engine, "before_cursor_execute", ingest_once)
        try:
            read = read_window(session, cid, 10_000, MIN_ITEMS)
        finally:
            event.remove(db.engine, "before_cursor_execute", ingest_once)
    assert committed == [0, cid]  # the ingest committed meanwhile
    held = cache.get(cid, stamp, 10_000, MIN_ITEMS)
    if "message 20" in str(read.entries[-1]):  # the window saw the ingest (READ COMMITTED)
        assert held is None
    else:  # one snapshot throughout (SQLite): what it read is the stamp's window
        assert held is not None
        assert held.entries == read.entries
    assert assembled(db, cid, 10_000) == uncached_assembly(db, cid, 10_000)


def test_a_snapshot_keeps_its_window_without_reading_the_stamp_again(db: Database) -> None:
    """In one snapshot (assembly's session) the stamp is read once: an ingest committed
    right after that read is in neither the window nor the stamp, the window is kept
    under the stamp read, and the next assembly grows it by the ingest's item."""
    tenant = new_tenant(db)
    cid = ingest(db, tenant.tenant_id, "agent", texts(20))
    cache = db.window_cache
    assert cache is not None
    stamps: list[str] = []

    def ingest_after_the_stamp(conn: Any, cursor: Any, statement: str, *args: object) -> None:
        if "context_version" in statement and statement.lstrip().upper().startswith("SELECT"):
            stamps.append(statement)
            if len(stamps) == 1:  # another thread, as another request would
                worker = threading.Thread(
                    target=lambda: ingest(db, tenant.tenant_id, "agent", texts(1, start=20))
                )
                worker.start()
                worker.join()

    event.listen(db.engine, "after_cursor_execute", ingest_after_the_stamp)
    try:
        with db.snapshot_session() as session:
            read = read_window(session, cid, 10_000, MIN_ITEMS)
    finally:
        event.remove(db.engine, "after_cursor_execute", ingest_after_the_stamp)
    assert len(stamps) == 1  # not read again to keep the window
    assert "message 19" in str(read.entries[-1])  # the snapshot's newest, not the ingest's
    assert read.stamp is not None  # kept under the stamp read
    assert read.memo is not None
    held = cache.get(cid, read.stamp, 10_000, MIN_ITEMS)
    assert held is not None
    assert held.entries == read.entries
    with db.snapshot_session() as session:
        grown = read_window(session, cid, 10_000, MIN_ITEMS)
        direct = direct_window(session, cid, 10_000)
    assert (grown.entries, grown.whole) == direct
    assert "message 20" in str(grown.entries[-1])


def test_readers_racing_ingest_and_compaction_see_their_own_snapshot(db: Database) -> None:
    """Readers assemble through the shared cache while another thread ingests and
    compacts: in every reader's snapshot, the cached window is the one the database
    holds in that snapshot."""
    tenant = new_tenant(db)
    cid = ingest(db, tenant.tenant_id, "agent", texts(30))
    stop = threading.Event()
    failures: list[str] = []
    checked = [0]

    def reader() -> None:
        while not stop.is_set():
            try:
                with db.snapshot_session() as session:
                    cached = read_window(session, cid, 600, MIN_ITEMS)
                    direct = direct_window(session, cid, 600)
                if (cached.entries, cached.whole) != direct:
                    failures.append(f"stale window: {cached.entries[-1]} vs {direct[0][-1]}")
                checked[0] += 1
            except Exception as error:
                failures.append(repr(error))

    readers = [threading.Thread(target=reader) for _ in range(3)]
    for thread in readers:
        thread.start()
    try:
        for round_ in range(4):
            ingest(db, tenant.tenant_id, "agent", texts(12, start=30 + 12 * round_), index=False)
            compact(db, tenant.tenant_id, cid)
    finally:
        stop.set()
        for thread in readers:
            thread.join()
    assert failures == []
    assert checked[0] > 0
    assert assembled(db, cid, 600) == uncached_assembly(db, cid, 600)


def test_an_unchanged_context_is_assembled_once_per_settings(db: Database) -> None:
    tenant = new_tenant(db)
    cid = ingest(db, tenant.tenant_id, "agent", texts(30))
    compact(db, tenant.tenant_id, cid)  # summaries show their times in the settings' zone
    in_tokyo = CompactionSettings(fresh_tail_count=4, timezone="Asia/Tokyo")
    with db.snapshot_session() as session:
        first = assemble(session, cid, 300, SETTINGS)
        again = assemble(session, cid, 300, SETTINGS.model_copy())  # equal settings
        timed = assemble(session, cid, 300, SETTINGS, times=True)
        tokyo = assemble(session, cid, 300, in_tokyo)
    assert again is first
    assert timed is not first
    assert timed.message_spans()
    assert tokyo is not first
    assert tokyo.messages != first.messages
    ingest(db, tenant.tenant_id, "agent", texts(1, start=30))
    with db.snapshot_session() as session:
        grown = assemble(session, cid, 300, SETTINGS)
    assert grown is not first
    assert grown.messages == uncached_assembly(db, cid, 300)


def stamp_of(version: int, newest: int) -> Stamp:
    return Stamp(version, 0, newest, newest)


def entries_of(n: int) -> CachedWindow:
    return CachedWindow(stamp_of(1, n), 100, 1, tuple(range(n)), whole=True)  # type: ignore[arg-type]


def test_the_cache_drops_the_least_recently_used_conversation_first() -> None:
    cache = WindowCache(capacity=10)
    cache.put(1, entries_of(4))
    cache.put(2, entries_of(4))
    assert cache.get(1, stamp_of(1, 4), 100, 1) is not None  # 1 is now the most recent
    cache.put(3, entries_of(4))
    assert cache.get(2, stamp_of(1, 4), 100, 1) is None
    assert cache.get(1, stamp_of(1, 4), 100, 1) is not None
    assert len(cache) == 8
    cache.put(4, entries_of(11))  # larger than the whole cache: not kept
    assert cache.get(4, stamp_of(1, 11), 100, 1) is None
    assert len(cache) == 8
    assert cache.get(1, stamp_of(2, 4), 100, 1) is None  # another stamp
    cache.forget_conversations([1, 3])
    assert len(cache) == 0

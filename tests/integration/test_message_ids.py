"""SQLite never gives a message id twice (migration 0024), so embedded mode caches views.

Without it an erased newest message's id went to the next message stored,
and a process that had cached the erased one's view (any process but the
erasing one) would serve it in the new one's place.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from sqlalchemy import create_engine, inspect, text

from lcm.assembly.repository import AssemblyRepository
from lcm.context import ContextEntry
from lcm.context_store.repository import window_entries
from lcm.db.engine import Database
from lcm.db.migrate import upgrade
from lcm.db.models import Base
from lcm.erasure.service import erase_conversation
from lcm.errors import NotFound
from lcm.retrieval.grep import GrepQuery
from lcm.retrieval.scope import ScopeSelector
from lcm.retrieval.search_backlog import index_search_backlog
from tests.conftest import new_tenant, settings_for
from tests.integration.retrieval_data import ingest
from tests.integration.test_message_cache import fresh_read, history
from tests.integration.test_retrieval_grep import run
from tests.integration.test_search_backlog import index_is_sound

BEFORE = "0023_secret_spans"  # the revision before 0024


def later_columns(url: str) -> list[tuple[str, str]]:
    """(table, column) that today's models map and the database at ``url`` lacks.

    The seed below is written by today's code into a database at ``BEFORE``;
    columns that migrations after 0024 add are read and written by that code,
    so they are added for the seed and taken away before the upgrade runs.
    """
    engine = create_engine(url)
    try:
        present = inspect(engine)
        tables = set(present.get_table_names())
        missing = []
        for table in Base.metadata.sorted_tables:
            if table.name in tables:
                have = {c["name"] for c in present.get_columns(table.name)}
                missing += [(table.name, c.name) for c in table.columns if c.name not in have]
        return missing
    finally:
        engine.dispose()


def alter(url: str, statements: list[str]) -> None:
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            for statement in statements:
                conn.execute(text(statement))
    finally:
        engine.dispose()


def ids_and_contents(db: Database) -> list[tuple[int, str]]:
    with db.read_session() as s:
        return [(int(i), str(c)) for i, c in s.execute(text("SELECT id, content FROM messages"))]


def erase(db: Database, tenant_id: str, cid: int) -> None:
    with db.transaction() as session:
        erase_conversation(session, tenant_id, cid)


def found(db: Database, tenant_id: str, word: str, key: str) -> list[str]:
    query = GrepQuery(word, "full_text", scope="messages")
    result = run(db, tenant_id, query, ScopeSelector(session_key=key))
    return [m.snippet.replace("«", "").replace("»", "") for m in result.matches]


def test_the_migration_keeps_ids_and_search_and_never_reuses_an_erased_id(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    upgrade(url, BEFORE)
    later = later_columns(url)
    assert ("conversations", "context_appends") in later  # 0029's: what this guards
    alter(url, [f"ALTER TABLE {t} ADD COLUMN {c} INTEGER" for t, c in later])
    db = Database(settings_for(url))
    try:
        tenant = new_tenant(db).tenant_id
        ingest(db, tenant, "kept", ["the zanzibar deploy", "rolled back"])
        ingest(db, tenant, "quokkas", ["quokka one", "quokka two"])
        newest = ingest(db, tenant, "queued", ["still in the backlog: wombat"], index=False)
        before = ids_and_contents(db)
        db.dispose()
        alter(url, [f"ALTER TABLE {t} DROP COLUMN {c}" for t, c in later])
        upgrade(url)
        db = Database(settings_for(url))
        assert ids_and_contents(db) == before
        assert found(db, tenant, "zanzibar", "kept") == ["the zanzibar deploy"]
        assert found(db, tenant, "wombat", "queued") == ["still in the backlog: wombat"]
        index_search_backlog(db.transaction)  # the migrated table's insert trigger queued it
        assert index_is_sound(db)
        assert found(db, tenant, "wombat", "queued") == ["still in the backlog: wombat"]
        # The newest conversation holds the largest ids; erased, none is given again.
        erase(db, tenant, newest)
        highest = max(i for i, _ in before)
        ingest(db, tenant, "later", ["quokka three"])
        assert [i for i, c in ids_and_contents(db) if c == "quokka three"] == [highest + 1]
        assert found(db, tenant, "quokka", "later") == ["quokka three"]
        assert found(db, tenant, "zanzibar", "kept") == ["the zanzibar deploy"]
        assert index_is_sound(db)
    finally:
        db.dispose()


def test_another_process_s_cached_views_never_stand_for_new_messages(
    sqlite_db: Database,
) -> None:
    """A reader caches the newest messages; another process erases them and stores more."""
    reader = sqlite_db
    assert reader.message_cache is not None
    writer = Database(settings_for(reader.settings.database_url))
    try:
        tenant = new_tenant(writer).tenant_id
        erased = ingest(writer, tenant, "erased", [f"erased {i}" for i in range(6)])
        assert contents(window(reader, erased)) == [f"erased {i}" for i in range(6)]
        erase(writer, tenant, erased)  # the reader's cache is not told
        new = ingest(writer, tenant, "new", history(6))
        read = window(reader, new)
        assert read == fresh_read(reader, new)
        assert not any(c.startswith("erased") for c in contents(read))
    finally:
        writer.dispose()


def window(db: Database, cid: int) -> list[ContextEntry]:
    with db.read_session() as session:
        items = AssemblyRepository(session).window(cid, 1_000_000, 1).items
        return window_entries(session, cid, items)


def contents(entries: list[ContextEntry]) -> list[str]:
    return [str(e.message.content) for e in entries if e.message is not None]


def read_and_check(db: Database, cid: int) -> list[str]:
    """Assembly's window of ``cid``, each message as the database holds it in the same read:
    a message whose view differs from its row (a view cached for an erased id) is returned."""
    with db.read_session() as session:
        items = AssemblyRepository(session).window(cid, 1_000_000, 1).items
        entries = window_entries(session, cid, items)
        stored = text("SELECT id, content FROM messages WHERE conversation_id = :c")
        rows = {i: c for i, c in session.execute(stored, {"c": cid})}
    return [
        f"message {e.message.id} read as {e.message.content!r}, stored as {rows[e.message.id]!r}"
        for e in entries
        if e.message is not None and e.message.content != rows[e.message.id]
    ]


def test_a_reader_racing_erase_and_ingest_only_ever_sees_stored_messages(
    sqlite_db: Database,
) -> None:
    """Conversation after conversation is stored, read by another process, erased; the reader
    keeps assembling the newest one meanwhile and checks each message against its row."""
    reader = sqlite_db
    writer = Database(settings_for(reader.settings.database_url))
    current: list[int] = []  # the conversation the reader reads
    reads = [0]  # how many reads found messages
    done = threading.Event()
    wrong: list[str] = []

    def read() -> None:
        while not done.is_set():
            if current:
                try:
                    wrong.extend(read_and_check(reader, current[-1]))
                except NotFound:  # erased while it was read
                    continue
                reads[0] += 1

    thread = threading.Thread(target=read)
    thread.start()
    try:
        tenant = new_tenant(writer).tenant_id
        for round_ in range(12):
            cid = ingest(writer, tenant, f"r{round_}", [f"round {round_}: {i}" for i in range(8)])
            current.append(cid)
            seen, deadline = reads[0], time.monotonic() + 10
            while reads[0] < seen + 2:  # read since: its views are in the reader's cache
                assert time.monotonic() < deadline
                time.sleep(0.005)
            erase(writer, tenant, cid)  # the newest ids: the next round's, were they reused
    finally:
        done.set()
        thread.join(10)
        writer.dispose()
    assert reads[0] > 24
    assert wrong == []

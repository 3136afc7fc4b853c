"""SQLite indexes messages for search after their ingest commits (migration 0010).

The ingest transaction only records backlog rows; ``index_search_backlog``
moves them into the FTS5 tables a short transaction at a time; grep finds a
committed message whether it is indexed yet or not, and exactly once.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import DatabaseError
from sqlalchemy.orm import Session

from lcm.content import IncomingMessage
from lcm.db.engine import Database
from lcm.erasure.service import erase_conversations
from lcm.ingest.service import ingest_messages, prepare_batch
from lcm.outbox import IndexSearchBacklog
from lcm.retrieval.grep import GrepQuery
from lcm.retrieval.scope import ScopeSelector
from lcm.retrieval.search_backlog import index_search_backlog
from lcm.tenants.service import IssuedKey
from tests.conftest import RecordingSender, new_tenant
from tests.integration.retrieval_data import ingest
from tests.integration.test_retrieval_grep import run

FTS_TABLES = ("messages_fts", "messages_trigram")


def backlog(db: Database) -> int:
    with db.read_session() as s:
        return int(s.scalar(text("SELECT count(*) FROM search_backlog")) or 0)


def index_is_sound(db: Database) -> bool:
    """FTS5's own check: each index holds exactly the rows of ``messages`` (rank 1 compares
    an external-content index with its content table: a missing or a duplicate entry fails)."""
    # The command is an INSERT (read sessions refuse it); it changes nothing and is rolled back.
    with db.session() as s:
        try:
            for fts in FTS_TABLES:
                s.execute(text(f"INSERT INTO {fts} ({fts}, rank) VALUES ('integrity-check', 1)"))
        except DatabaseError:
            return False
    return True


def matches(db: Database, word: str) -> dict[str, int]:
    """How many index entries each FTS table holds for ``word`` (the index, not the content)."""
    with db.read_session() as s:
        return {
            fts: int(
                s.scalar(text(f"SELECT count(*) FROM {fts} WHERE {fts} MATCH :w"), {"w": word}) or 0
            )
            for fts in FTS_TABLES
        }


@pytest.fixture
def sqlite_tenant(sqlite_db: Database) -> IssuedKey:
    return new_tenant(sqlite_db)


def test_the_ingest_transaction_leaves_indexing_to_a_job_after_commit(db: Database) -> None:
    tenant = new_tenant(db)
    db.sender = recorded = RecordingSender()
    messages = [IncomingMessage("user", f"deploy note {i} zanzibar", None) for i in range(50)]
    with db.session() as session:
        ingest_messages(
            session,
            tenant.tenant_id,
            "agent:main",
            None,
            prepare_batch(messages, max_batch=100, max_chars=10**6),
        )
        if db.dialect == "sqlite":
            # Inside the ingest transaction: recorded for later, not indexed.
            assert session.scalar(text("SELECT count(*) FROM search_backlog")) == 50
        session.commit()
    if db.dialect == "postgresql":
        assert IndexSearchBacklog() not in recorded.jobs  # GIN indexes on the write path
        return
    assert recorded.jobs == [IndexSearchBacklog()]
    assert matches(db, "zanzibar") == {"messages_fts": 0, "messages_trigram": 0}
    assert not index_is_sound(db)  # the check sees committed rows the index lacks
    assert index_search_backlog(db.transaction, chunk_messages=7) == 50
    assert backlog(db) == 0
    assert matches(db, "zanzibar") == {"messages_fts": 50, "messages_trigram": 50}
    assert index_is_sound(db)
    assert index_search_backlog(db.transaction) == 0  # a second run finds nothing


@pytest.mark.parametrize(
    ("pattern", "mode"),
    [
        ("rollback of the zanzibar cluster", "full_text"),
        ("zanzibar", "full_text"),
        ('"zanzibar cluster" -staging', "full_text"),
        ("回滚集群", "full_text"),  # CJK: substring through the trigram table
        (r"zanzibar\s+cluster", "regex"),  # a literal: the trigram prefilter
        (r"za\w+ba\w", "regex"),  # no literal of 3+ characters: every row is scanned
    ],
)
@pytest.mark.parametrize("sort", ["recency", "relevance", "hybrid"])
def test_grep_finds_a_committed_message_before_and_after_indexing_exactly_once(
    sqlite_db: Database, sqlite_tenant: IssuedKey, pattern: str, mode: str, sort: str
) -> None:
    tid = sqlite_tenant.tenant_id
    # Indexed filler and an indexed match, then the new message left in the backlog.
    ingest(sqlite_db, tid, "agent:main", ["lunch plans", "the zanzibar cluster is fine 集群"])
    target = "we did a rollback of the zanzibar cluster at noon (回滚集群)"
    ingest(sqlite_db, tid, "agent:main", [target, "staging zanzibar cluster"], index=False)
    assert backlog(sqlite_db) == 2

    def found() -> list[str]:
        query = GrepQuery(pattern, mode, scope="messages", sort=sort)  # type: ignore[arg-type]
        result = run(sqlite_db, tid, query)
        return [str(m.id) for m in result.matches if "noon" in m.snippet]

    assert len(found()) == 1
    index_search_backlog(sqlite_db.transaction)
    assert backlog(sqlite_db) == 0
    assert len(found()) == 1


def test_grep_of_the_backlog_keeps_bounds_and_exclusions(
    sqlite_db: Database, sqlite_tenant: IssuedKey
) -> None:
    other = new_tenant(sqlite_db, "other")
    ingest(sqlite_db, other.tenant_id, "agent:main", ["zanzibar of the other tenant"], index=False)
    ingest(sqlite_db, sqlite_tenant.tenant_id, "agent:x", ["zanzibar elsewhere"], index=False)
    ingest(sqlite_db, sqlite_tenant.tenant_id, "agent:main", ["zanzibar staging"], index=False)
    for pattern, mode in (("zanzibar", "full_text"), ("zanzibar", "regex")):
        result = run(sqlite_db, sqlite_tenant.tenant_id, GrepQuery(pattern, mode, "messages"))  # type: ignore[arg-type]
        assert [m.snippet for m in result.matches] == ["«zanzibar» staging"]
    excluded = run(
        sqlite_db, sqlite_tenant.tenant_id, GrepQuery("zanzibar -staging", "full_text", "messages")
    )
    assert excluded.matches == []
    everywhere = run(
        sqlite_db,
        sqlite_tenant.tenant_id,
        GrepQuery("zanzibar", "full_text", "messages"),
        ScopeSelector(all_conversations=True),
    )
    assert len(everywhere.matches) == 2


def test_two_drains_at_once_index_every_message_exactly_once(
    sqlite_db: Database, sqlite_tenant: IssuedKey
) -> None:
    contents = [f"entry {i} quokka" for i in range(600)]
    ingest(sqlite_db, sqlite_tenant.tenant_id, "agent:main", contents, index=False)
    counts: list[int] = []
    start = threading.Barrier(2)

    def drain() -> None:
        start.wait()
        counts.append(index_search_backlog(sqlite_db.transaction, chunk_messages=13))

    threads = [threading.Thread(target=drain) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sum(counts) == 600  # each chunk was taken by one drain only
    assert backlog(sqlite_db) == 0
    assert matches(sqlite_db, "quokka") == {"messages_fts": 600, "messages_trigram": 600}
    assert index_is_sound(sqlite_db)


def test_erase_and_update_of_indexed_and_unindexed_messages_keep_the_index_sound(
    sqlite_db: Database, sqlite_tenant: IssuedKey
) -> None:
    """FTS5's 'delete' of a row it never indexed corrupts it: the triggers must skip those."""
    tid = sqlite_tenant.tenant_id
    indexed = ingest(sqlite_db, tid, "agent:a", ["indexed wombat", "indexed two"])
    pending = ingest(sqlite_db, tid, "agent:b", ["pending wombat", "pending two"], index=False)
    ingest(sqlite_db, tid, "agent:c", ["kept wombat"], index=False)
    ingest(sqlite_db, tid, "agent:c", ["kept and indexed"])  # drains agent:c's first one too
    ingest(sqlite_db, tid, "agent:c", ["kept pending"], index=False)
    with sqlite_db.transaction() as s:
        # One content update of an indexed row and one of a backlog row.
        s.execute(
            text("UPDATE messages SET content = 'edited kangaroo' WHERE content = 'kept wombat'")
        )
        s.execute(text("UPDATE messages SET content = 'edited emu' WHERE content = 'kept pending'"))
    with sqlite_db.transaction() as s:
        erase_conversations(s, tid, [indexed, pending])
    assert backlog(sqlite_db) == 0  # the update indexed the pending row; the erase took the rest
    assert index_is_sound(sqlite_db)
    assert matches(sqlite_db, "wombat") == {"messages_fts": 0, "messages_trigram": 0}
    assert matches(sqlite_db, "kangaroo")["messages_fts"] == 1
    assert matches(sqlite_db, "emu")["messages_fts"] == 1


class _Pausing:
    """``Database.transaction`` for the drain, pausing after its first chunk until released."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.chunks = 0
        self.first_chunk_done = threading.Event()
        self.release = threading.Event()

    def __call__(self) -> AbstractContextManager[Session]:
        return self._transaction()

    @contextmanager
    def _transaction(self) -> Iterator[Session]:
        with self.db.transaction() as session:
            yield session
        self.chunks += 1
        if self.chunks == 1:
            self.first_chunk_done.set()
        elif self.chunks == 2:
            # The other tenant's one-message ingest must be able to commit now,
            # between two chunks, not after the whole drain.
            self.release.wait(30)


def test_another_tenants_write_goes_between_two_chunks_of_a_big_batchs_indexing(
    sqlite_db: Database, sqlite_tenant: IssuedKey
) -> None:
    """The point of the backlog: a 1,000 x 2 KB batch's indexing does not hold the write lock.

    Its ingest transaction commits with every message still in the backlog
    (nothing indexed under its lock), and while the drain runs another
    tenant's ingest commits between two chunks. No timing is asserted: the
    drain is held after its second chunk until that ingest committed, so if
    the ingest needed the whole drain to finish it would not commit at all.
    """
    body = "lorem ipsum dolor sit amet " * 76  # ~2 KB
    big = [IncomingMessage("user", f"{i} {body}", f"m{i}") for i in range(1_000)]
    with sqlite_db.session() as s:
        ingest_messages(
            s,
            sqlite_tenant.tenant_id,
            "agent:big",
            None,
            prepare_batch(big, max_batch=1_000, max_chars=10**7),
        )
        assert s.scalar(text("SELECT count(*) FROM search_backlog")) == 1_000
        assert (
            s.scalar(text("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'lorem'"))
            == 0
        )
        s.commit()
    other = new_tenant(sqlite_db, "other")
    pausing = _Pausing(sqlite_db)
    drained: list[int] = []
    drain = threading.Thread(
        target=lambda: drained.append(index_search_backlog(pausing, chunk_messages=100))
    )
    drain.start()
    assert pausing.first_chunk_done.wait(60)
    left: dict[str, Any] = {}
    try:
        with sqlite_db.session() as s:
            one = [IncomingMessage("user", "a small write of another tenant", "x1")]
            ingest_messages(
                s,
                other.tenant_id,
                "agent:main",
                None,
                prepare_batch(one, max_batch=10, max_chars=10**6),
            )
            s.commit()
        left["backlog"] = backlog(sqlite_db)
    finally:
        pausing.release.set()
        drain.join(120)
    # Committed while the big batch was still being indexed (its backlog, plus its own row).
    assert left["backlog"] >= 1_000 - 2 * 100 + 1
    assert drained == [1_001]
    assert backlog(sqlite_db) == 0
    assert index_is_sound(sqlite_db)


def test_beat_indexes_the_backlog_on_sqlite_only() -> None:
    """What a lost job or a crash left is indexed by beat (embedded beat: also at start)."""
    from lcm.settings import Settings
    from workers.celery_app import beat_schedule
    from workers.tasks.search import index_backlog

    sqlite = beat_schedule(Settings(database_url="sqlite:////tmp/x.db"))["search-index-backlog"]
    assert sqlite["task"] == "search.index_backlog"
    assert index_backlog.name == "search.index_backlog"
    postgres = beat_schedule(Settings(database_url="postgresql://u@localhost/lcm"))
    assert "search-index-backlog" not in postgres


def test_backlog_queries_walk_the_backlog_not_the_tenants_messages(
    sqlite_db: Database, sqlite_tenant: IssuedKey
) -> None:
    """Without table statistics SQLite would walk every message of the tenant (reading its
    text) to test it against a backlog of a few rows; each backlog query must start from the
    backlog (or the rowids it names) instead."""
    tid = sqlite_tenant.tenant_id
    ingest(sqlite_db, tid, "agent:main", [f"old {i} wallaby notes" for i in range(200)])
    ingest(sqlite_db, tid, "agent:main", ["new wallaby notes"], index=False)
    statements: list[tuple[str, Any]] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, *args: Any) -> None:
        statements.append((statement, parameters))

    event.listen(sqlite_db.engine, "before_cursor_execute", record)
    try:
        for pattern, mode in (("wallaby notes", "full_text"), ("wallaby notes", "regex")):
            assert run(sqlite_db, tid, GrepQuery(pattern, mode, "messages", limit=200))  # type: ignore[arg-type]
    finally:
        event.remove(sqlite_db.engine, "before_cursor_execute", record)
    plans = []
    raw = sqlite_db.engine.raw_connection()
    try:
        for statement, parameters in statements:
            if "search_backlog" in statement and ("instr" in statement or "LIKE" in statement):
                cursor = raw.cursor()
                cursor.execute(f"EXPLAIN QUERY PLAN {statement}", parameters)
                plans.append(" / ".join(str(row[3]) for row in cursor.fetchall()))
    finally:
        raw.close()
    assert len(plans) == 2, statements
    full_text, regex = plans
    assert "SEARCH messages USING INTEGER PRIMARY KEY" in full_text, full_text
    assert "SCAN backlog_message" not in regex, regex
    assert "SCAN search_backlog" in regex, regex


def test_indexing_a_chunk_walks_the_backlog_not_every_message(
    sqlite_db: Database, sqlite_tenant: IssuedKey
) -> None:
    """The chunk's insert starts from the backlog's rows and looks each message up by rowid,
    instead of walking every message up to the chunk's last id (all tenants') and probing
    the backlog for each: that grew with the table and every writer waited behind it."""
    tid = sqlite_tenant.tenant_id
    ingest(sqlite_db, tid, "agent:main", [f"old {i} wallaby notes" for i in range(300)])
    ingest(sqlite_db, tid, "agent:main", ["new wallaby notes"], index=False)
    statements: list[tuple[str, Any]] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, *args: Any) -> None:
        if statement.startswith("INSERT INTO") and "search_backlog" in statement:
            statements.append((statement, parameters))

    event.listen(sqlite_db.engine, "before_cursor_execute", record)
    try:
        index_search_backlog(sqlite_db.transaction)
    finally:
        event.remove(sqlite_db.engine, "before_cursor_execute", record)
    assert backlog(sqlite_db) == 0
    assert set(matches(sqlite_db, "new").values()) == {1}, "indexed once, in each index"
    assert index_is_sound(sqlite_db)
    raw = sqlite_db.engine.raw_connection()
    plans = []
    try:
        for statement, parameters in statements:
            cursor = raw.cursor()
            cursor.execute(f"EXPLAIN QUERY PLAN {statement}", parameters)
            plans.append(" / ".join(str(row[3]) for row in cursor.fetchall()))
    finally:
        raw.close()
    assert len(plans) == 2, statements  # one insert per search index
    for plan in plans:
        first, *_ = plan.split(" / ")
        assert first.startswith(("SCAN b", "SEARCH b")), plan  # the backlog is the outer loop
        assert "SEARCH m USING INTEGER PRIMARY KEY (rowid=?)" in plan, plan

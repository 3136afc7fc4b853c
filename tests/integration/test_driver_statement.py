"""Hot statements run on the driver read and write exactly what SQLAlchemy would.

``DriverStatement`` runs a prebuilt statement on the driver's cursor of the
session's connection (psycopg on Postgres; ``sqlite3`` for any statement
without an ``IN`` list, else ``Connection.execute``).
These pin what it promises in place of SQLAlchemy's execution layer: the
same rows and types, the session's transaction, the cursor events,
SQLAlchemy's error classes, a dead connection invalidated, defaults filled.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import bindparam, event, insert, select, text, update
from sqlalchemy.exc import DBAPIError, IntegrityError

from lcm.content import IncomingMessage
from lcm.db.driver import DriverStatement
from lcm.db.engine import Database
from lcm.db.models import CompactionDebt, Conversation, Message, MessagePart
from lcm.ingest.service import ingest_messages, prepare_batch
from tests.concurrency import race
from tests.conftest import new_tenant, settings_for
from tests.integration.test_pool_checkout import backend_of, terminate

PAYLOAD = {"type": "tool_use", "id": "toolu_1", "name": "grep", "input": {"q": "ünïcode ✓"}}


def stored_conversation(db: Database) -> tuple[str, int]:
    tenant_id = new_tenant(db).tenant_id
    batch = prepare_batch(
        [
            IncomingMessage("user", "look for the error"),
            IncomingMessage("assistant", [{"type": "text", "text": "on it"}, PAYLOAD]),
        ],
        max_batch=10,
        max_chars=10_000,
    )
    with db.transaction() as session:
        cid = ingest_messages(session, tenant_id, "k", None, batch).conversation_id
    return tenant_id, cid


MESSAGE_ROWS = (
    select(Message.seq, Message.role, Message.created_at, MessagePart.payload)
    .join(MessagePart, MessagePart.message_id == Message.id)
    .where(Message.conversation_id == bindparam("cid"))
    .order_by(Message.seq, MessagePart.ordinal)
)


def test_rows_are_those_sqlalchemy_reads(db: Database) -> None:
    _, cid = stored_conversation(db)
    statement = DriverStatement(MESSAGE_ROWS)
    with db.session() as session:
        if db.dialect == "postgresql":  # timestamps come back in the session's zone
            session.execute(text("SET LOCAL TIME ZONE 'Asia/Tokyo'"))
        through_sqlalchemy = [tuple(r) for r in session.execute(MESSAGE_ROWS, {"cid": cid})]
        rows = statement.run(session, {"cid": cid}).all()
    assert [tuple(r) for r in rows] == through_sqlalchemy
    assert [r[3] for r in rows][-1] == PAYLOAD  # JSON decoded
    created_at = rows[0][2]
    assert isinstance(created_at, datetime)
    assert created_at.tzinfo == UTC  # the column type's result processing applied


def test_parameters_go_through_their_types_processing(db: Database) -> None:
    """A naive timestamp is refused by the column type, as through SQLAlchemy."""
    _, cid = stored_conversation(db)
    touch = DriverStatement(
        update(Conversation)
        .where(Conversation.id == bindparam("cid"))
        .values(updated_at=bindparam("now", type_=Conversation.updated_at.type))
    )
    with db.session() as session, pytest.raises(Exception, match="naive datetime"):
        touch.run(session, {"cid": cid, "now": datetime(2026, 1, 1)})


def test_a_statement_takes_part_in_the_session_transaction(db: Database) -> None:
    pg_db = db  # both backends: on SQLite too an UPDATE runs on the driver
    _, cid = stored_conversation(pg_db)
    bump = DriverStatement(
        update(Conversation)
        .where(Conversation.id == bindparam("cid"))
        .values(context_version=Conversation.context_version + 1)
        .returning(Conversation.context_version)
    )

    def version() -> int:
        with pg_db.read_session() as session:
            return int(session.scalar(select(Conversation.context_version)) or 0)

    before = version()
    with pg_db.session() as session:
        assert bump.run(session, {"cid": cid}).scalar() == before + 1
        session.rollback()
    assert version() == before
    with pg_db.transaction() as session:
        bump.run(session, {"cid": cid})
        # The same transaction sees its own write through SQLAlchemy too.
        assert session.scalar(select(Conversation.context_version)) == before + 1
    assert version() == before + 1


def test_cursor_events_see_every_statement(db: Database) -> None:
    _, cid = stored_conversation(db)
    seen: list[tuple[str, str, Any, Any]] = []

    def before(conn: Any, cursor: Any, statement: str, params: Any, context: Any, _: Any) -> None:
        seen.append(("before", statement, params, context))

    def after(conn: Any, cursor: Any, statement: str, params: Any, context: Any, _: Any) -> None:
        seen.append(("after", statement, params, context))

    event.listen(db.engine, "before_cursor_execute", before)
    event.listen(db.engine, "after_cursor_execute", after)
    try:
        with db.session() as session:
            DriverStatement(MESSAGE_ROWS).run(session, {"cid": cid})
    finally:
        event.remove(db.engine, "before_cursor_execute", before)
        event.remove(db.engine, "after_cursor_execute", after)
    assert [when for when, *_ in seen[-2:]] == ["before", "after"]
    assert "FROM messages JOIN message_parts" in seen[-1][1]
    # On the driver on both (no SQLAlchemy execution context): SQLite's ``?`` take a tuple.
    assert seen[-1][2] == ({"cid": cid} if db.dialect == "postgresql" else (cid,))
    assert seen[-1][3] is None


def test_a_select_on_sqlite_reads_the_read_session_s_snapshot(sqlite_db: Database) -> None:
    """Run on the sqlite3 connection, it is in the session's transaction: a message
    committed meanwhile by another connection stays out of a read session begun before."""
    tenant_id, cid = stored_conversation(sqlite_db)
    statement = DriverStatement(MESSAGE_ROWS)
    with sqlite_db.read_session() as session:
        first = statement.run(session, {"cid": cid}).all()
        batch = prepare_batch([IncomingMessage("user", "later")], max_batch=1, max_chars=100)
        with sqlite_db.transaction() as writer:
            ingest_messages(writer, tenant_id, "k", None, batch)
        assert statement.run(session, {"cid": cid}).all() == first
    with sqlite_db.read_session() as session:
        assert len(statement.run(session, {"cid": cid}).all()) == len(first) + 1


def test_a_constraint_violation_is_sqlalchemys_integrity_error(db: Database) -> None:
    pg_db = db  # both backends: on SQLite too an INSERT runs on the driver
    tenant_id, cid = stored_conversation(pg_db)
    add_debt = DriverStatement(
        insert(CompactionDebt), ("conversation_id", "tenant_id", "reason", "status")
    )
    row = {"conversation_id": cid, "tenant_id": tenant_id, "reason": "threshold"}
    with pg_db.transaction() as session:
        add_debt.run(session, {**row, "status": "pending"})
    with pg_db.session() as session, pytest.raises(IntegrityError):
        add_debt.run(session, {**row, "status": "pending"})  # one debt row per conversation
    with pg_db.read_session() as session:  # the pool's connection is usable again
        debt = session.get(CompactionDebt, cid)
    # The columns the statement did not name got their defaults, plain and callable.
    assert debt is not None
    assert (debt.attempts, debt.fencing_token, debt.rearmed) == (0, 0, False)
    assert debt.created_at is not None
    assert abs((datetime.now(UTC) - debt.created_at).total_seconds()) < 60


def test_rows_run_one_by_one_return_their_ids_in_order(db: Database) -> None:
    """``run_each``: an INSERT … RETURNING per row, ids in the order given, the
    cursor events once around the batch as for an ``executemany``; a failing
    row leaves none of the batch once the transaction rolls back."""
    tenant_id, cid = stored_conversation(db)
    add = DriverStatement(
        insert(Message).returning(Message.id),
        ("tenant_id", "conversation_id", "seq", "role", "content", "token_count"),
    )
    rows = [
        {"tenant_id": tenant_id, "conversation_id": cid, "seq": seq, "role": "user"}
        | {"content": f"m{seq}", "token_count": 1}
        for seq in (12, 10, 11)
    ]
    batches: list[bool] = []

    def before(*args: Any) -> None:
        if "INSERT INTO messages" in args[2]:
            batches.append(args[-1])  # executemany

    event.listen(db.engine, "before_cursor_execute", before)
    try:
        with db.transaction() as session:
            ids = [row[0] for row in add.run_each(session, rows)]
    finally:
        event.remove(db.engine, "before_cursor_execute", before)
    assert batches == [True]
    with db.read_session() as session:
        found = session.execute(select(Message.id, Message.seq).where(Message.id.in_(ids)))
        by_id = dict(found.tuples().all())
    assert [by_id[i] for i in ids] == [12, 10, 11]
    with db.session() as session, pytest.raises(IntegrityError):
        add.run_each(session, [{**rows[0], "seq": 13}, rows[1]])  # seq 10 is taken
    with db.read_session() as session:
        assert session.scalar(select(Message.id).where(Message.seq == 13)) is None


def test_a_dead_connection_is_invalidated_and_replaced(pg_db: Database) -> None:
    pooled = Database(settings_for(pg_db.settings.database_url, db_pool_size=1))
    ping = DriverStatement(select(text("1")))
    try:
        with pooled.session() as session:
            pid = int(session.scalar(text("SELECT pg_backend_pid()")) or 0)
            terminate(pg_db, {pid})
            with pytest.raises(DBAPIError) as raised:
                ping.run(session)
            assert raised.value.connection_invalidated
        # The pool opens a new connection instead of handing the dead one out.
        assert backend_of(pooled.session) != pid
        with pooled.session() as session:
            assert ping.run(session).scalar() == 1
    finally:
        pooled.dispose()


def test_an_in_list_expanded_at_execution_is_refused(pg_db: Database) -> None:
    expanding = DriverStatement(
        select(Message.id).where(Message.id.in_(bindparam("ids", expanding=True)))
    )
    with pg_db.session() as session, pytest.raises(ValueError, match="ANY"):
        expanding.run(session, {"ids": [1, 2]})


def test_threads_compiling_one_statement_at_once_all_read_their_rows(pg_db: Database) -> None:
    """The plan is compiled on first use: threads racing to it all get it right."""
    _, cid = stored_conversation(pg_db)
    statement = DriverStatement(MESSAGE_ROWS)

    def read(_: int) -> int:
        with pg_db.read_session() as session:
            return len(statement.run(session, {"cid": cid}).all())

    raced = race(8, read)
    assert not raced.errors
    assert raced.results == [3] * 8  # "look for…" and the assistant's two blocks

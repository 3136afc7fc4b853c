"""The write path against real databases: exactly once, all or nothing, in order."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from sqlalchemy import func, select

from lcm.content import IncomingMessage
from lcm.db.engine import Database
from lcm.db.models import ContextItem, Conversation, Message, MessagePart
from lcm.errors import InvalidInput
from lcm.ingest.service import IngestResult, ingest_messages, prepare_batch
from lcm.tenants.service import IssuedKey
from tests.concurrency import race
from tests.conftest import new_tenant


def ingest(
    db: Database,
    tenant_id: str,
    key: str,
    msgs: Sequence[IncomingMessage],
    session_id: str | None = None,
) -> IngestResult:
    batch = prepare_batch(msgs, max_batch=10_000, max_chars=1_000_000)
    with db.session() as session:
        result = ingest_messages(session, tenant_id, key, session_id, batch)
        session.commit()
    return result


def seqs(db: Database, conversation_id: int) -> list[int]:
    with db.session() as s:
        return list(
            s.scalars(
                select(Message.seq)
                .where(Message.conversation_id == conversation_id)
                .order_by(Message.seq)
            )
        )


def test_seq_and_context_items(db: Database, tenant: IssuedKey) -> None:
    r1 = ingest(db, tenant.tenant_id, "k", [IncomingMessage("user", f"m{i}") for i in range(3)])
    r2 = ingest(db, tenant.tenant_id, "k", [IncomingMessage("assistant", "reply")])
    assert r1.conversation_id == r2.conversation_id
    assert (r1.first_seq, r1.last_seq, r2.first_seq) == (1, 3, 4)
    assert seqs(db, r1.conversation_id) == [1, 2, 3, 4]
    with db.session() as s:
        items = s.execute(
            select(ContextItem.ordinal, Message.seq)
            .join(Message, Message.id == ContextItem.message_id)
            .order_by(ContextItem.ordinal)
        ).all()
        conv = s.get(Conversation, r1.conversation_id)
    assert [seq for _, seq in items] == [1, 2, 3, 4]
    assert conv is not None
    assert conv.context_version == 2


def test_resending_a_batch_stores_nothing_new(db: Database, tenant: IssuedKey) -> None:
    batch = [IncomingMessage("user", f"m{i}", client_id=f"id-{i}") for i in range(5)]
    first = ingest(db, tenant.tenant_id, "k", batch)
    again = ingest(db, tenant.tenant_id, "k", batch)
    assert (first.ingested, first.duplicates) == (5, 0)
    assert (again.ingested, again.duplicates) == (0, 5)
    mixed = ingest(
        db,
        tenant.tenant_id,
        "k",
        [
            *batch[:2],
            IncomingMessage("user", "new", client_id="id-9"),
            IncomingMessage("user", "dup in batch", client_id="id-9"),
        ],
    )
    assert (mixed.ingested, mixed.duplicates) == (1, 3)
    assert seqs(db, first.conversation_id) == [1, 2, 3, 4, 5, 6]


def test_a_bad_message_writes_nothing_of_its_batch(db: Database, tenant: IssuedKey) -> None:
    good = IncomingMessage("user", "fine", client_id="a")
    with pytest.raises(InvalidInput):
        ingest(db, tenant.tenant_id, "k", [good, IncomingMessage("user", [{"type": "bogus"}])])
    with db.session() as s:
        assert s.scalar(select(func.count()).select_from(Message)) == 0
        assert s.scalar(select(func.count()).select_from(Conversation)) == 0


def test_parts_rebuild_the_sent_message_exactly(db: Database, tenant: IssuedKey) -> None:
    blocks = [
        {"type": "thinking", "thinking": "hmm", "signature": "c2ln"},
        {"type": "text", "text": "Let me check 你好.", "citations": None},
        {
            "type": "tool_use",
            "id": "toolu_1",
            "name": "read",
            "input": {"path": "a.py", "n": [1, 2]},
        },
    ]
    r = ingest(db, tenant.tenant_id, "k", [IncomingMessage("assistant", blocks)])
    with db.session() as s:
        parts = s.scalars(
            select(MessagePart)
            .join(Message)
            .where(Message.conversation_id == r.conversation_id)
            .order_by(MessagePart.ordinal)
        ).all()
        message = s.scalar(select(Message).where(Message.conversation_id == r.conversation_id))
    assert [p.payload for p in parts] == blocks
    assert message is not None
    assert message.content_shape == "blocks"
    assert parts[2].tool_call_id == "toolu_1"


def test_a_batch_keeps_each_message_with_its_own_parts(db: Database, tenant: IssuedKey) -> None:
    """Postgres writes a batch in one statement, parts joined to messages by seq."""
    sent = [
        IncomingMessage("user", "first", client_id="c1"),
        IncomingMessage(
            "assistant",
            [{"type": "text", "text": "two"}, {"type": "tool_use", "id": "t2", "name": "x"}],
        ),
        IncomingMessage("user", [{"type": "tool_result", "tool_use_id": "t2", "content": "ok"}]),
        IncomingMessage("assistant", "last", client_id="c4"),
    ]
    ingest(db, tenant.tenant_id, "k", [IncomingMessage("user", "before")])
    r = ingest(db, tenant.tenant_id, "k", sent)
    with db.session() as s:
        messages = s.execute(
            select(Message.id, Message.seq, Message.client_id, Message.token_count)
            .where(Message.conversation_id == r.conversation_id, Message.seq >= 2)
            .order_by(Message.seq)
        ).all()
        parts = s.execute(
            select(MessagePart.message_id, MessagePart.payload).order_by(
                MessagePart.message_id, MessagePart.ordinal
            )
        ).all()
        items = s.execute(
            select(ContextItem.ordinal, ContextItem.message_id, ContextItem.token_count)
            .where(ContextItem.ordinal >= 2)
            .order_by(ContextItem.ordinal)
        ).all()
    ids = [m.id for m in messages]
    assert [m.seq for m in messages] == [2, 3, 4, 5]
    assert ids == sorted(ids)  # ids ascend with seqs, as one insert per message gives them
    client_ids = [m.client_id for m in messages]
    assert (client_ids[0], client_ids[3]) == ("c1", "c4")
    assert all(c.startswith("evt:") for c in client_ids[1:3])  # keyed by their events
    by_message = {mid: [p for m, p in parts if m == mid] for mid in ids}
    assert by_message[ids[0]] == [{"type": "text", "text": "first"}]
    assert by_message[ids[1]] == sent[1].content
    assert by_message[ids[2]] == sent[2].content
    assert [(o, mid, t) for o, mid, t in items] == [
        (2 + i, m.id, m.token_count) for i, m in enumerate(messages)
    ]


def test_session_families(db: Database, tenant: IssuedKey) -> None:
    t = tenant.tenant_id
    a = ingest(db, t, "fam", [IncomingMessage("user", "a")], session_id="s1")
    a2 = ingest(db, t, "fam", [IncomingMessage("user", "a2")], session_id="s1")
    b = ingest(db, t, "fam", [IncomingMessage("user", "b")], session_id="s2")
    late = ingest(db, t, "fam", [IncomingMessage("user", "late retry")], session_id="s1")
    assert a.conversation_id == a2.conversation_id == late.conversation_id
    assert b.conversation_id != a.conversation_id
    assert b.first_seq == 1
    with db.session() as s:
        convs = {c.session_id: c for c in s.scalars(select(Conversation))}
    assert convs["s1"].archived_at is not None
    assert convs["s2"].archived_at is None
    # Another tenant's identical key is a different family.
    other = new_tenant(db, "other")
    o = ingest(db, other.tenant_id, "fam", [IncomingMessage("user", "x")], session_id="s1")
    assert o.conversation_id not in (a.conversation_id, b.conversation_id)


def concurrent_writers(
    db: Database, tenant_id: str, writers: int, per_writer: int, batch: int
) -> list[BaseException]:

    def write(w: int) -> None:
        for i in range(0, per_writer, batch):
            ingest(
                db,
                tenant_id,
                "hot",
                [
                    IncomingMessage("user", f"w{w} m{j}", client_id=f"{w}-{j}")
                    for j in range(i, min(i + batch, per_writer))
                ],
            )

    return race(writers, write).errors


def test_8_concurrent_writers_x_500_on_postgres(pg_db: Database) -> None:
    t = new_tenant(pg_db)
    errors = concurrent_writers(pg_db, t.tenant_id, writers=8, per_writer=500, batch=10)
    assert errors == []
    with pg_db.session() as s:
        conv = s.scalar(select(Conversation))
        assert conv is not None
        got = seqs(pg_db, conv.id)
        ids = s.scalar(select(func.count(func.distinct(Message.client_id))))
    assert got == list(range(1, 4001))
    assert ids == 4000
    assert conv.last_seq == 4000


def test_concurrent_writers_on_sqlite(sqlite_db: Database) -> None:
    t = new_tenant(sqlite_db)
    errors = concurrent_writers(sqlite_db, t.tenant_id, writers=4, per_writer=100, batch=5)
    assert errors == []
    with sqlite_db.session() as s:
        conv = s.scalar(select(Conversation))
    assert conv is not None
    assert seqs(sqlite_db, conv.id) == list(range(1, 401))


@pytest.mark.parametrize("round_", range(5))
def test_concurrent_retries_of_the_same_batch_store_it_once(
    db: Database, tenant: IssuedKey, round_: int
) -> None:
    # The family exists already, so the race is on the dedupe check alone.
    ingest(db, tenant.tenant_id, "retry", [IncomingMessage("user", "first")])
    batch = [IncomingMessage("user", f"m{i}", client_id=f"c{i}") for i in range(20)]
    raced = race(6, lambda _: ingest(db, tenant.tenant_id, "retry", batch))
    results, failures = raced.results, raced.errors
    assert failures == []  # a retry must never fail
    assert sorted(r.ingested for r in results) == [0, 0, 0, 0, 0, 20]
    assert sum(r.duplicates for r in results) == 100
    assert seqs(db, results[0].conversation_id) == list(range(1, 22))


def test_concurrent_first_writes_create_one_conversation(db: Database, tenant: IssuedKey) -> None:

    def send(i: int) -> IngestResult:
        return ingest(
            db,
            tenant.tenant_id,
            "new-family",
            [IncomingMessage("user", f"hello {i}")],
            session_id="sess",
        )

    raced = race(6, send)
    assert raced.errors == []
    results = raced.results
    assert len({r.conversation_id for r in results}) == 1
    assert seqs(db, results[0].conversation_id) == [1, 2, 3, 4, 5, 6]

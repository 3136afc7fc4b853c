"""A bootstrap commits in chunks, and stays exactly once when it fails between them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from lcm.db.engine import Database
from lcm.db.models import Message
from lcm.tenants.service import IssuedKey
from lcm.transcripts.service import BootstrapOptions, BootstrapResult, bootstrap_transcript

MESSAGES = 45
CHUNK = 10


def transcript(n: int) -> bytes:
    """A pi v3 session of ``n`` messages on one branch."""
    lines = [{"type": "session", "version": 3, "id": "s-1", "timestamp": "2026-01-01T00:00:00Z"}]
    for i in range(n):
        lines.append(
            {
                "type": "message",
                "id": f"e{i:04d}",
                "parentId": f"e{i - 1:04d}" if i else None,
                "timestamp": f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}Z",
                "message": {"role": "user" if i % 2 == 0 else "assistant", "content": f"step {i}"},
            }
        )
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


class Crash(Exception):
    pass


class Transactions:
    """``db.transaction`` that counts transactions and can fail one just before its commit."""

    def __init__(self, db: Database, crash_at: int | None = None) -> None:
        self.db, self.crash_at, self.count = db, crash_at, 0

    @contextmanager
    def __call__(self) -> Iterator[Session]:
        self.count += 1
        with self.db.transaction() as session:
            yield session
            if self.count == self.crash_at:
                raise Crash(f"transaction {self.count}")


def boot(
    db: Database, tenant: IssuedKey, data: bytes, crash_at: int | None = None
) -> BootstrapResult:
    options = BootstrapOptions(chunk_messages=CHUNK)
    return bootstrap_transcript(
        Transactions(db, crash_at), tenant.tenant_id, "k", None, data, options
    )


def stored_ids(db: Database) -> list[str]:
    with db.read_session() as s:
        return list(s.scalars(select(Message.client_id).order_by(Message.seq)))


def expected_ids(n: int) -> list[str]:
    return [f"e{i:04d}" for i in range(n)]


def test_each_chunk_is_its_own_transaction(db: Database, tenant: IssuedKey) -> None:
    transactions = Transactions(db)
    options = BootstrapOptions(chunk_messages=CHUNK)
    result = bootstrap_transcript(
        transactions, tenant.tenant_id, "k", None, transcript(MESSAGES), options
    )
    assert result.imported == MESSAGES
    assert transactions.count == 1 + 5  # the conversation, then chunks of 10, 10, 10, 10, 5
    tiny = Transactions(db)
    bootstrap_transcript(
        tiny, tenant.tenant_id, "other", None, transcript(4), BootstrapOptions(chunk_chars=1)
    )
    assert tiny.count == 1 + 4  # a chunk holds at least one message, however large


# Transaction 1 finds the conversation; transaction k >= 2 writes chunk k - 1;
# the last (6) also writes the checkpoint.
@pytest.mark.parametrize("crash_at", [2, 3, 6])
def test_a_failure_between_chunks_then_a_retry_imports_everything_once(
    db: Database, tenant: IssuedKey, crash_at: int
) -> None:
    data = transcript(MESSAGES)
    with pytest.raises(Crash):
        boot(db, tenant, data, crash_at)
    committed = (crash_at - 2) * CHUNK
    assert stored_ids(db) == expected_ids(committed)  # whole chunks, in order
    retry = boot(db, tenant, data)
    assert (retry.imported, retry.duplicates) == (MESSAGES - committed, 0)
    assert retry.anchor == ("id" if committed else "empty")
    assert stored_ids(db) == expected_ids(MESSAGES)
    again = boot(db, tenant, data)
    assert (again.imported, again.anchor, again.anchor_seq) == (0, "checkpoint", MESSAGES)


def test_a_failed_resume_from_a_checkpoint_is_retried_exactly_once(
    db: Database, tenant: IssuedKey
) -> None:
    """The gateway's transcript grew; the incremental import fails after one chunk."""
    boot(db, tenant, transcript(15))
    with pytest.raises(Crash):
        boot(db, tenant, transcript(MESSAGES), crash_at=3)
    assert stored_ids(db) == expected_ids(25)
    retry = boot(db, tenant, transcript(MESSAGES))
    # The old checkpoint still holds: the appended part is read again, and the
    # chunk that committed before the failure is recognised by its client ids.
    assert (retry.anchor, retry.imported, retry.duplicates) == ("checkpoint", 20, 10)
    assert stored_ids(db) == expected_ids(MESSAGES)
    with db.read_session() as s:
        seqs = list(s.scalars(select(Message.seq).order_by(Message.seq)))
    assert seqs == list(range(1, MESSAGES + 1))

"""Session rotation: a new session_id archives the live conversation; retained summaries carry."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from lcm.assembly import assemble_context
from lcm.compaction.engine import CompactionEngine
from lcm.compaction.repository import CompactionRepository
from lcm.content import IncomingMessage
from lcm.db.engine import Database
from lcm.db.models import Conversation, Message
from lcm.ingest.service import ingest_messages, prepare_batch
from lcm.settings import CompactionSettings
from lcm.summarize.extractive import ExtractiveProvider
from lcm.summarize.summarizer import Summarizer
from lcm.tenants.service import IssuedKey
from lcm.transcripts.service import BootstrapOptions, bootstrap_transcript
from tests.helpers import compact

SETTINGS = CompactionSettings(
    fresh_tail_count=8, leaf_chunk_tokens=600, condensed_min_fanout=3, sweep_max_depth=1
)


def write(db: Database, tenant_id: str, session_id: str, texts: list[str], depth: int = -1) -> int:
    batch = prepare_batch(
        [IncomingMessage("user" if i % 2 == 0 else "assistant", t) for i, t in enumerate(texts)],
        max_batch=1000,
        max_chars=10**6,
    )
    with db.transaction() as s:
        result = ingest_messages(
            s, tenant_id, "family", session_id, batch, new_session_retain_depth=depth
        )
    return result.conversation_id


@pytest.fixture
def archived(db: Database, tenant: IssuedKey) -> tuple[int, list[tuple[str, int]]]:
    """Session s1 with leaf and depth-1 summaries in its context: (id, [(summary id, depth)])."""
    texts = [
        f"step {i}: we decided to deploy build {i} to staging because tests pass" * 3
        for i in range(96)
    ]
    conversation_id = write(db, tenant.tenant_id, "s1", texts)
    engine = CompactionEngine(db.transaction, Summarizer(ExtractiveProvider()))
    compact(db, tenant.tenant_id, conversation_id, SETTINGS, token_budget=4_000)
    entries = engine.load(conversation_id)
    summaries = [(e.summary.id, e.summary.depth) for e in entries if e.summary is not None]
    assert {d for _, d in summaries} == {0, 1}, "the fixture needs both depths in context"
    return conversation_id, summaries


@pytest.mark.parametrize(("depth", "kept"), [(-1, set()), (0, {0, 1}), (1, {1}), (5, set())])
def test_retained_summaries_carry_into_the_new_session(
    db: Database,
    tenant: IssuedKey,
    archived: tuple[int, list[tuple[str, int]]],
    depth: int,
    kept: set[int],
) -> None:
    old_id, summaries = archived
    new_id = write(db, tenant.tenant_id, "s2", ["fresh start after /reset"], depth=depth)
    assert new_id != old_id
    with db.session() as s:
        old = s.get(Conversation, old_id)
        assert old is not None
        assert old.archived_at is not None
        entries = CompactionRepository(s).load_entries(new_id)
        reachable = set(CompactionRepository(s).reachable_message_ids(new_id))
        old_messages = set(s.scalars(select(Message.id).where(Message.conversation_id == old_id)))
    carried = [e.summary.id for e in entries if e.summary is not None]
    assert carried == [sid for sid, d in summaries if d in kept]  # same nodes, same order
    assert entries[-1].message is not None
    assert entries[-1].message.content == "fresh start after /reset"
    assert [e.ordinal for e in entries] == list(range(1, len(entries) + 1))
    # Carried summaries still lead to the archived session's messages.
    assert bool(reachable & old_messages) == bool(kept)
    context = assemble_context(entries, 100_000, SETTINGS)
    assert context.summary_count == len(carried)
    # A late retry of the old session goes back to it and carries nothing anywhere.
    assert write(db, tenant.tenant_id, "s1", ["late retry"], depth=0) == old_id


def test_bootstrap_of_a_new_session_file_rotates(
    db: Database, tenant: IssuedKey, archived: tuple[int, list[tuple[str, int]]]
) -> None:
    old_id, summaries = archived
    message = {"role": "user", "content": "hi"}
    line = json.dumps({"type": "message", "timestamp": "2026-01-01T00:00:00Z", "message": message})
    options = BootstrapOptions(new_session_retain_depth=1)
    result = bootstrap_transcript(
        db.transaction, tenant.tenant_id, "family", "s3", line.encode(), options
    )
    assert result.conversation_id != old_id
    assert result.imported == 1
    with db.session() as s:
        entries = CompactionRepository(s).load_entries(result.conversation_id)
    assert [e.summary.id for e in entries if e.summary] == [sid for sid, d in summaries if d >= 1]

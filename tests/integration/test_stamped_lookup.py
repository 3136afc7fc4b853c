"""Assembly's conversation lookup reads the context's stamp in the same statement.

``target_for_assembly`` is ``target_for_read`` and ``AssemblyRepository.stamp``
in one statement (lcm/window_cache.py): for every shape of family and
context, what it returns is what the two return. Both backends.
"""

from __future__ import annotations

import pytest
from sqlalchemy import update

from lcm.assembly.repository import AssemblyRepository
from lcm.conversations.service import target_for_assembly, target_for_read, target_for_write
from lcm.db.engine import Database
from lcm.db.models import Conversation, utcnow
from lcm.errors import NotFound
from tests.conftest import new_tenant
from tests.integration.retrieval_data import compact, ingest


def both_ways(db: Database, tenant_id: str, key: str, session_id: str | None = None) -> None:
    """The stamped lookup agrees with the two reads it replaces, in one snapshot."""
    with db.snapshot_session() as session:
        ref, read = target_for_assembly(session, tenant_id, key, session_id)
        assert ref == target_for_read(session, tenant_id, key, session_id)
        assert read.stamp == AssemblyRepository(session).stamp(ref.id)


def test_the_stamped_lookup_is_the_lookup_and_the_stamp(db: Database) -> None:
    tenant = new_tenant(db).tenant_id
    with db.transaction() as session:  # a conversation with no context item yet
        empty = target_for_write(session, tenant, "empty", None)
    with db.snapshot_session() as session:
        ref, read = target_for_assembly(session, tenant, "empty")
    assert ref.id == empty.id
    assert read.stamp is None
    texts = [f"message {i}: deployed build {i} and ran the checks" for i in range(60)]
    raw = ingest(db, tenant, "raw", texts[:5])
    both_ways(db, tenant, "raw")
    compacted = ingest(db, tenant, "compacted", texts)
    compact(db, tenant, compacted)
    both_ways(db, tenant, "compacted")
    # A family: an archived conversation by its session id, the active one by default.
    ingest(db, tenant, "family", texts[:4], session_id="s1")
    with db.transaction() as session:
        session.execute(
            update(Conversation)
            .where(Conversation.session_key == "family", Conversation.tenant_id == tenant)
            .values(archived_at=utcnow())
        )
    active = ingest(db, tenant, "family", texts[4:9], session_id="s2")
    both_ways(db, tenant, "family")
    both_ways(db, tenant, "family", "s1")
    with db.snapshot_session() as session:
        assert target_for_assembly(session, tenant, "family")[0].id == active
        assert target_for_assembly(session, tenant, "family", "s1")[0].id not in (active, raw)
    for key, session_id in (("missing", None), ("family", "s3")):
        with db.snapshot_session() as session, pytest.raises(NotFound):
            target_for_assembly(session, tenant, key, session_id)

"""The growth benchmark's bulk load (``bench/growth_bulk.py``) leaves Postgres as it found it.

It drops the loaded tables' secondary indexes, unique constraints and
foreign keys and rebuilds them; its figures are honest only if the rebuilt
database has every one of them back, with the same definition, and if the
rebuild checks the loaded rows as the constraints would have.
"""

from __future__ import annotations

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from bench.growth_bulk import LOADED, bulk_load, deferred, schema_of, settle
from bench.growth_seed import Seeder
from lcm.db.engine import Database
from lcm.db.models import ContextItem, Message, MessagePart
from lcm.doctor.structure import find_structural
from tests.conftest import new_tenant


def test_a_bulk_load_rebuilds_every_index_and_constraint_it_set_aside(pg_db: Database) -> None:
    tenant = new_tenant(pg_db).tenant_id
    with pg_db.engine.connect() as conn:
        before = schema_of(conn)
        aside = deferred(conn)
        seeder = Seeder(conn, tenant)
        with bulk_load(conn, True, seeder.timings):
            cids = seeder.raw([f"c{n}" for n in range(50)], 20)
            # Set aside inside the load: the loaded tables hold their primary keys only.
            assert schema_of(conn) == {d for d in before if d.name.startswith("pk_")}
        conn.commit()
        settle(pg_db.engine, seeder.timings)
        assert schema_of(conn) == before
    kinds = {d.kind for d in aside}
    names = {d.name for d in aside}
    assert kinds == {"i", "u", "f"}
    assert {
        "ix_messages_conversation_content_trgm",
        "fk_context_items_message_id_messages",
    } <= names
    assert {f"rebuild {name}" for name in names} <= seeder.timings.keys()
    assert {"vacuum", "checkpoint"} <= seeder.timings.keys()
    with pg_db.session() as s:
        assert s.scalar(select(func.count()).select_from(Message)) == 1_000
        assert s.scalar(select(func.count()).select_from(MessagePart)) == 1_000
        assert s.scalar(select(func.count()).select_from(ContextItem)) == 1_000
        assert find_structural(s, tenant, None) == {}
    assert len(cids) == 50
    assert set(LOADED) == {d.table for d in aside}


def test_rows_that_break_a_constraint_fail_the_load_and_keep_nothing(pg_db: Database) -> None:
    """The rebuilt unique constraint checks the loaded rows, as it would have row by row."""
    tenant = new_tenant(pg_db).tenant_id
    with pg_db.engine.connect() as conn:
        before = schema_of(conn)
        seeder = Seeder(conn, tenant)
        load = bulk_load(conn, True, seeder.timings)
        load.__enter__()
        cids = seeder.raw(["twice"], 10)
        seeder.extend(cids, 0, 10)  # the same seqs again
        with pytest.raises(IntegrityError, match="could not create unique index"):
            load.__exit__(None, None, None)  # the rebuild after a load that went through
        conn.rollback()
        assert schema_of(conn) == before
    with pg_db.session() as s:
        assert s.scalar(select(func.count()).select_from(Message)) == 0

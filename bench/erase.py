"""Erasing a 10,000-message conversation on Postgres (issue: tenant operations).

The conversation is built as a long one looks after compaction: messages
with parts, leaf summaries over all but a raw tail, condensed layers above,
context items (``bench.compaction.build_history``). Two more conversations of
the same size stay in the tables around it, so every lookup runs against
tables that hold other data too.

Figures, median of ``--repeat`` runs, each on a freshly built conversation:

* the erase (``erase_conversation``: lock, reference check, every delete,
  commit);
* the reference: a plain ``DELETE`` of 10,000 rows from a table with no
  foreign keys (the floor for removing that many rows);
* a tenant's erasure (``erase_tenant``) holding one 2,000-message
  conversation, beside the first tenant's messages and again after that
  tenant grew by 100,000 more; its reference is the same conversation
  erased from a tenant that stays;
* the erase again after dropping migration 0006's indexes on the foreign
  keys a delete follows, to show what they are for.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from functools import partial

from sqlalchemy import text
from sqlalchemy.orm import Session

from bench.compaction import _analyze, build_history
from bench.servers import postgres
from lcm.db.engine import Database
from lcm.erasure.service import Erased, erase_conversation, erase_tenant
from lcm.settings import Settings
from lcm.tenants.service import create_tenant

MESSAGES = 10_000
SMALL_TENANT = 2_000  # messages of the tenant erased beside a big one
BIGGER = 100_000  # messages the big tenant grows by between the two tenant figures
FK_INDEXES = (
    "ix_context_items_message_id",
    "ix_context_items_summary_id",
    "ix_large_files_conversation_id",
    "ix_large_files_message_id",
)


def run(args: argparse.Namespace) -> None:
    repeat = max(1, args.repeat)
    with postgres() as url:
        db = Database(Settings(database_url=url))
        with db.transaction() as s:
            tenant_id = create_tenant(s, "bench-erase").tenant_id
        for n in range(2):
            build_history(db, tenant_id, f"background-{n}", MESSAGES)
        print(f"  {MESSAGES:,}-message conversation, median of {repeat}", flush=True)
        erase = _erase_runs(db, tenant_id, repeat, "indexed")
        reference = _plain_delete_runs(db, repeat)
        print(f"  erase (one transaction):          {statistics.median(erase):7.1f} ms")
        print(
            f"  reference, plain DELETE of {MESSAGES:,} rows: "
            f"{statistics.median(reference):7.1f} ms"
        )
        _tenant_erasure(db, tenant_id, repeat)
        with db.transaction() as s:
            for name in FK_INDEXES:
                s.execute(text(f"DROP INDEX {name}"))
        slow = _erase_runs(db, tenant_id, 1, "unindexed")
        print(f"  erase without 0006's FK indexes:  {statistics.median(slow):7.1f} ms", flush=True)
        db.dispose()


def _tenant_erasure(db: Database, big_tenant: str, repeat: int) -> None:
    """A small tenant's erasure, beside a big tenant and then beside a bigger one.

    Its time should not grow with the other tenant's rows: every statement
    finds the small tenant's rows through an index
    (``tests/integration/test_erasure.py``). Erasing the same content as one
    conversation of a tenant that stays is the reference.
    """
    print(f"  a tenant holding one {SMALL_TENANT:,}-message conversation, median of {repeat}")
    for grow in (0, BIGGER):
        if grow:
            build_history(db, big_tenant, "background-bigger", grow)
        with db.engine.connect() as conn:
            background = conn.execute(text("SELECT count(*) FROM messages")).scalar_one()
        tenants, conversations = [], []
        for n in range(repeat):
            with db.transaction() as s:
                small = create_tenant(s, f"bench-erase-small-{grow}-{n}").tenant_id
            build_history(db, small, "only", SMALL_TENANT)
            cid = build_history(db, big_tenant, f"alike-{grow}-{n}", SMALL_TENANT)
            _analyze(db)
            tenants.append(_timed(db, partial(erase_tenant, tenant_id=small))[0])
            erase = partial(erase_conversation, tenant_id=big_tenant, conversation_id=cid)
            conversations.append(_timed(db, erase)[0])
        print(
            f"    beside {background:,} messages of another tenant: erase the tenant "
            f"{statistics.median(tenants):6.1f} ms; reference, the same conversation "
            f"erased from a tenant that stays {statistics.median(conversations):6.1f} ms",
            flush=True,
        )


def _erase_runs(db: Database, tenant_id: str, repeat: int, label: str) -> list[float]:
    times = []
    for n in range(repeat):
        cid = build_history(db, tenant_id, f"erase-{label}-{n}", MESSAGES)
        _analyze(db)
        ms, erased = _timed(
            db, partial(erase_conversation, tenant_id=tenant_id, conversation_id=cid)
        )
        times.append(ms)
        assert erased.rows > 2 * MESSAGES
    return times


def _timed(db: Database, work: Callable[[Session], Erased]) -> tuple[float, Erased]:
    """Milliseconds to run ``work`` in one transaction, its commit included, and its result."""
    started = time.perf_counter()
    with db.transaction() as s:
        result = work(s)
    return (time.perf_counter() - started) * 1000, result


def _plain_delete_runs(db: Database, repeat: int) -> list[float]:
    times = []
    with db.engine.connect() as conn:
        conn.execute(text("CREATE TABLE bench_rows (id bigint PRIMARY KEY, body text)"))
        conn.commit()
        for _ in range(repeat):
            conn.execute(
                text(
                    "INSERT INTO bench_rows SELECT g, repeat('x', 400) "
                    f"FROM generate_series(1, {MESSAGES}) g"
                )
            )
            conn.commit()
            started = time.perf_counter()
            conn.execute(text("DELETE FROM bench_rows"))
            conn.commit()
            times.append((time.perf_counter() - started) * 1000)
        conn.execute(text("DROP TABLE bench_rows"))
        conn.commit()
    return times

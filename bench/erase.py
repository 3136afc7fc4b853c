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
* the erase again after dropping migration 0006's indexes on the foreign
  keys a delete follows, to show what they are for.
"""

from __future__ import annotations

import argparse
import statistics
import time

from sqlalchemy import text

from bench.compaction import build_history
from bench.servers import postgres
from lcm.db.engine import Database
from lcm.erasure.service import erase_conversation
from lcm.settings import Settings
from lcm.tenants.service import create_tenant

MESSAGES = 10_000
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
        with db.transaction() as s:
            for name in FK_INDEXES:
                s.execute(text(f"DROP INDEX {name}"))
        slow = _erase_runs(db, tenant_id, 1, "unindexed")
        print(f"  erase without 0006's FK indexes:  {statistics.median(slow):7.1f} ms", flush=True)
        db.dispose()


def _erase_runs(db: Database, tenant_id: str, repeat: int, label: str) -> list[float]:
    times = []
    for n in range(repeat):
        cid = build_history(db, tenant_id, f"erase-{label}-{n}", MESSAGES)
        with db.engine.connect() as conn:
            conn.execute(text("ANALYZE"))
            conn.commit()
        started = time.perf_counter()
        with db.transaction() as s:
            erased = erase_conversation(s, tenant_id, cid)
        times.append((time.perf_counter() - started) * 1000)
        assert erased.rows > 2 * MESSAGES
    return times


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

"""What the search indexes cost batch ingest: the same ingest with and without them.

Two databases on one Postgres (fsync on): one as migrated, one with the
``messages`` search structures of migration 0002 removed (the generated
``content_tsv`` column and the GIN indexes on it and on the content's trigrams). The
same messages are ingested through lcm's own write path into each, runs
interleaved so machine noise hits both alike. Real messages from
``../shared/data`` when present (their sizes matter: GIN work grows with the
distinct words and trigrams of each message), else synthetic ones.
"""

from __future__ import annotations

import argparse
import statistics
import time

import psycopg

from bench.deployment import drop_database, fresh_database
from bench.servers import postgres
from bench.workload import real_steps, synthetic_steps
from lcm.content import IncomingMessage
from lcm.db.engine import Database
from lcm.db.migrate import upgrade
from lcm.ingest.service import ingest_messages, prepare_batch
from lcm.settings import Settings
from lcm.tenants.service import create_tenant
from tests.servers import with_database

BATCH = 100
DROP_SEARCH = (
    # 0002's indexes, or 0032's that replace them where btree_gin exists.
    "DROP INDEX IF EXISTS ix_messages_content_trgm",
    "DROP INDEX IF EXISTS ix_messages_content_tsv",
    "DROP INDEX IF EXISTS ix_messages_conversation_content_trgm",
    "DROP INDEX IF EXISTS ix_messages_conversation_content_tsv",
    "ALTER TABLE messages DROP COLUMN content_tsv",
)


def _messages(n: int) -> list[tuple[str, object]]:
    steps = real_steps() or synthetic_steps()
    out: list[tuple[str, object]] = []
    while len(out) < n:
        for step in steps:
            out.extend((*step.inputs, *step.outputs))
    return out[:n]


def _run(database: Database, tenant_id: str, items: list[tuple[str, object]], run: int) -> float:
    messages = [
        IncomingMessage(role, content, f"r{run}-{i}")  # type: ignore[arg-type]
        for i, (role, content) in enumerate(items)
    ]
    started = time.perf_counter()
    for start in range(0, len(messages), BATCH):
        batch = prepare_batch(messages[start : start + BATCH], max_batch=BATCH, max_chars=10**7)
        with database.session() as session:
            ingest_messages(session, tenant_id, f"bench-{run}", None, batch)
            session.commit()
    return len(messages) / (time.perf_counter() - started)


def run(args: argparse.Namespace) -> None:
    n, repeat = min(args.messages, 5_000), args.repeat
    items = _messages(n)
    chars = statistics.mean(len(str(c)) for _, c in items)
    print(f"  {n:,} messages per run (mean {chars:,.0f} chars), batches of {BATCH}", flush=True)
    with postgres() as url:
        bare_url = fresh_database(with_database(url, "postgres"), "lcm_bench_nosearch")
        upgrade(bare_url)
        with psycopg.connect(bare_url, autocommit=True) as conn:
            for statement in DROP_SEARCH:
                conn.execute(statement)
        figures: dict[str, list[float]] = {"with": [], "without": []}
        databases = {
            "with": Database(Settings(database_url=url)),
            "without": Database(Settings(database_url=bare_url)),
        }
        tenants = {}
        for name, database in databases.items():
            with database.transaction() as session:
                tenants[name] = create_tenant(session, "bench").tenant_id
        for r in range(repeat):
            for name, database in databases.items():
                figures[name].append(_run(database, tenants[name], items, r))
        for database in databases.values():
            database.dispose()
        drop_database(with_database(url, "postgres"), "lcm_bench_nosearch")
        with_ = statistics.median(figures["with"])
        without = statistics.median(figures["without"])
        print(
            f"  with search indexes {with_:,.0f} msg/s, without {without:,.0f} msg/s: "
            f"indexing costs {1 - with_ / without:.0%} of ingest throughput "
            f"(runs: {figures})",
            flush=True,
        )

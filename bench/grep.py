"""grep on Postgres: lcm's indexed search against an unindexed scan of the same table.

Rows are written with COPY (search indexes dropped during the load and
rebuilt after, as an operator would for a bulk import), then the table grows
from the first size to the next. At each size, each query runs ``--repeat``
times (after one warm-up) through :func:`lcm.retrieval.grep.grep`, and the
reference runs the same predicate with index scans disabled, so Postgres has
to read every row: ``to_tsvector`` computed on the fly for full text,
Postgres's own ``~`` for the regex.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import psycopg

from bench.servers import postgres
from lcm.db.engine import Database
from lcm.retrieval.grep import GrepLimits, GrepQuery, grep
from lcm.retrieval.search_rows import Bounds
from lcm.settings import Settings
from lcm.tenants.service import create_tenant

PER_CONVERSATION = 10_000
PHRASE = "rollback of the payments service"
QUERIES = {
    "full_text": GrepQuery("payments rollback", "full_text", "messages", "relevance", 50),
    "regex": GrepQuery(r"timeout after \d+ ms", "regex", "messages", "recency", 50),
}
UNINDEXED = {
    "full_text": (
        "SELECT id FROM messages WHERE tenant_id = %(t)s AND "
        "to_tsvector('english', left(content, 250000)) @@ websearch_to_tsquery('english', %(q)s) "
        "ORDER BY ts_rank_cd(to_tsvector('english', left(content, 250000)), "
        "websearch_to_tsquery('english', %(q)s)) DESC LIMIT 50",
        "payments rollback",
    ),
    "regex": (
        "SELECT id FROM messages WHERE tenant_id = %(t)s AND content ~ %(q)s "
        "ORDER BY created_at DESC LIMIT 50",
        "timeout after [0-9]+ ms",
    ),
}
_SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "shi", "po", "den", "vak", "zu", "el"]
_COMMON = [
    "the",
    "build",
    "deploy",
    "server",
    "cache",
    "config",
    "user",
    "agent",
    "error",
    "fix",
    "test",
    "log",
]


def _vocabulary(rng: random.Random) -> list[str]:
    words = {"".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))) for _ in range(4000)}
    return sorted(words) + _COMMON * 40


def _content(rng: random.Random, vocab: list[str], i: int) -> str:
    words = rng.choices(vocab, k=rng.randint(18, 32))
    roll = rng.random()
    if roll < 0.002:
        words.insert(rng.randrange(len(words)), PHRASE)
    elif roll < 0.004:
        words.insert(rng.randrange(len(words)), "payments team asked for a rollback plan")
    elif roll < 0.007:
        words.insert(rng.randrange(len(words)), f"timeout after {rng.randint(10, 9999)} ms")
    return f"{i}: " + " ".join(words)


def _load(conn: psycopg.Connection, tenant_id: str, first: int, last: int) -> None:
    """Messages ``first``..``last - 1`` (ids and seqs), COPYed with search indexes dropped."""
    rng, vocab = random.Random(first), _vocabulary(random.Random(7))
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for index in ("content_tsv", "content_trgm"):
        # 0002's names, and 0032's (led by conversation_id, where btree_gin exists).
        conn.execute(f"DROP INDEX IF EXISTS ix_messages_{index}")
        conn.execute(f"DROP INDEX IF EXISTS ix_messages_conversation_{index}")
    conversations = {}
    for c in range(first // PER_CONVERSATION, (last - 1) // PER_CONVERSATION + 1):
        row = conn.execute(
            "INSERT INTO conversations (tenant_id, session_key, created_at, context_version, "
            "last_seq, last_ordinal) VALUES (%s, %s, now(), 0, %s, 0) RETURNING id",
            (tenant_id, f"bench-{c}", PER_CONVERSATION),
        ).fetchone()
        assert row is not None
        conversations[c] = row[0]
    cols = "id, tenant_id, conversation_id, seq, role, content, content_shape, token_count, "
    with conn.cursor() as cur, cur.copy(f"COPY messages ({cols}created_at) FROM STDIN") as copy:
        for i in range(first, last):
            text = _content(rng, vocab, i)
            copy.write_row(
                (
                    i + 1,
                    tenant_id,
                    conversations[i // PER_CONVERSATION],
                    i % PER_CONVERSATION + 1,
                    "user" if i % 2 == 0 else "assistant",
                    text,
                    "text",
                    len(text) // 4,
                    start + timedelta(seconds=i),
                )
            )
    conn.execute("SET maintenance_work_mem = '512MB'")
    # Migration 0032's indexes (the bench's server has btree_gin).
    conn.execute(
        "CREATE INDEX ix_messages_conversation_content_tsv "
        "ON messages USING gin (conversation_id, content_tsv)"
    )
    conn.execute(
        "CREATE INDEX ix_messages_conversation_content_trgm "
        "ON messages USING gin (conversation_id, content gin_trgm_ops)"
    )
    conn.execute("ANALYZE messages")
    conn.commit()


def _p50(fn: Callable[[], object], repeat: int) -> float:
    fn()  # warm-up: caches and plans, as in a running service
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        runs.append((time.perf_counter() - started) * 1000)
    return statistics.median(runs)


def _measure(
    database: Database, conn: psycopg.Connection, tenant_id: str, size: int, repeat: int
) -> None:
    bounds = Bounds(tenant_id, None)
    limits = GrepLimits(timeout_ms=600_000, max_pattern_chars=1_000, half_life_hours=168)
    for name, query in QUERIES.items():

        def lcm_grep(query: GrepQuery = query) -> object:
            with database.session() as session:
                return grep(session, bounds, query, limits)

        sql, pattern = UNINDEXED[name]

        def unindexed(sql: str = sql, pattern: str = pattern) -> object:
            with conn.transaction():
                conn.execute("SET LOCAL enable_indexscan = off")
                conn.execute("SET LOCAL enable_bitmapscan = off")
                return conn.execute(sql, {"t": tenant_id, "q": pattern}).fetchall()

        found = len(lcm_grep().matches)  # type: ignore[attr-defined]
        indexed_ms = _p50(lcm_grep, repeat)
        scan_ms = _p50(unindexed, max(1, repeat // 2) if size > 100_000 else repeat)
        print(
            f"  {size:>9,} msgs  {name:<9}  lcm grep p50 {indexed_ms:8.1f} ms"
            f"   unindexed scan p50 {scan_ms:9.1f} ms   ratio {scan_ms / indexed_ms:7.1f}x"
            f"   ({found} matches)",
            flush=True,
        )


def run(args: argparse.Namespace) -> None:
    sizes = sorted(args.grep_sizes)
    print(f"  sizes {sizes}, {args.repeat} runs per figure (median), limit 50", flush=True)
    with postgres() as url:
        database = Database(Settings(database_url=url))
        with database.session() as session:
            tenant_id = create_tenant(session, "bench").tenant_id
            session.commit()
        conn = psycopg.connect(url.replace("postgresql+psycopg", "postgresql"))
        loaded = 0
        for size in sizes:
            started = time.perf_counter()
            _load(conn, tenant_id, loaded, size)
            print(f"  loaded {size - loaded:,} rows in {time.perf_counter() - started:.0f} s")
            loaded = size
            _measure(database, conn, tenant_id, size, args.repeat)
        conn.close()
        database.dispose()

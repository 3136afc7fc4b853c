"""Batch ingest into Postgres: lcm's write path against raw psycopg on the same rows.

Each stored message is three rows (message, message_part, context_item). The
references write exactly those rows for the same messages, in the same
batches, one transaction per batch: ``executemany`` (what a careful
hand-written insert does) and ``COPY`` (the fastest bulk path Postgres has).
lcm additionally locks the conversation row, checks client ids for
duplicates and allocates seqs; the ratio shows what that costs. lcm runs
twice, with semantic recall off and on (``LCM_SEMANTIC=on`` adds an embed job
to each batch's outbox, sent after commit; the embedding itself is the
worker's, measured by ``python -m bench semantic --server``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import psycopg

from bench.servers import postgres
from lcm.content import IncomingMessage
from lcm.db.engine import Database
from lcm.ingest.service import ingest_messages, prepare_batch
from lcm.settings import Settings
from lcm.tenants.service import create_tenant

BATCH = 100


class _Sender:
    """The broker's stand-in: counts the jobs a commit sends."""

    def __init__(self) -> None:
        self.sent = 0

    def send(self, jobs: Sequence[object]) -> None:
        self.sent += len(jobs)


def _messages(n: int, tag: str) -> list[IncomingMessage]:
    body = "The build failed in src/app/main.py line 42; retrying with the cache cleared. " * 3
    return [
        IncomingMessage("user" if i % 2 == 0 else "assistant", f"{body} #{i}", f"{tag}-{i}")
        for i in range(n)
    ]


def _lcm_run(settings: Settings, sender: _Sender, tenant_id: str, n: int, run: int) -> float:
    """One run on an engine of its own, made for it and disposed after: two
    long-lived engines measured 1.16x apart with the same settings."""
    database = Database(settings, sender)
    messages = _messages(n, f"lcm{run}")
    started = time.perf_counter()
    for start in range(0, n, BATCH):
        batch = prepare_batch(messages[start : start + BATCH], max_batch=BATCH, max_chars=10**6)
        with database.session() as session:
            ingest_messages(session, tenant_id, f"bench-{run}", None, batch)
            session.commit()
    took = time.perf_counter() - started
    database.dispose()
    return n / took


def _settle(conn: psycopg.Connection, most_seconds: float = 60.0) -> None:
    """A checkpoint, then until no autovacuum worker runs (at most ``most_seconds``)."""
    conn.execute("CHECKPOINT")
    conn.commit()
    until = time.monotonic() + most_seconds
    while time.monotonic() < until:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'"
        ).fetchone()
        conn.commit()
        if row is None or row[0] == 0:
            return
        time.sleep(0.2)


def _setup_conversation(conn: psycopg.Connection, tenant_id: str, key: str) -> int:
    row = conn.execute(
        "INSERT INTO conversations (tenant_id, session_key, created_at, context_version, "
        "last_seq, last_ordinal) VALUES (%s, %s, now(), 0, 0, 0) RETURNING id",
        (tenant_id, key),
    ).fetchone()
    conn.commit()
    assert row is not None
    return int(row[0])


def _rows(n: int, tenant_id: str, conv: int, first_id: int) -> list[tuple[tuple, tuple, tuple]]:
    now = datetime.now(UTC)
    out = []
    for i, m in enumerate(_messages(n, "raw")):
        mid = first_id + i
        text = str(m.content)
        out.append(
            (
                (
                    mid,
                    tenant_id,
                    conv,
                    i + 1,
                    m.role,
                    text,
                    "text",
                    len(text) // 4,
                    now,
                    m.client_id,
                ),
                (tenant_id, mid, 0, "text", text, json.dumps({"type": "text", "text": text})),
                (tenant_id, conv, i + 1, "message", mid, len(text) // 4),
            )
        )
    return out


MSG_COLS = (
    "id, tenant_id, conversation_id, seq, role, content, content_shape, token_count, "
    "created_at, client_id"
)
PART_COLS = "tenant_id, message_id, ordinal, part_type, text, payload"
ITEM_COLS = "tenant_id, conversation_id, ordinal, item_type, message_id, token_count"


def _executemany_run(conn: psycopg.Connection, rows: list[tuple[tuple, tuple, tuple]]) -> float:
    started = time.perf_counter()
    with conn.cursor() as cur:
        for start in range(0, len(rows), BATCH):
            chunk = rows[start : start + BATCH]
            cur.executemany(
                f"INSERT INTO messages ({MSG_COLS}) VALUES ({', '.join(['%s'] * 10)})",
                [r[0] for r in chunk],
            )
            cur.executemany(
                f"INSERT INTO message_parts ({PART_COLS}) VALUES (%s,%s,%s,%s,%s,%s)",
                [r[1] for r in chunk],
            )
            cur.executemany(
                f"INSERT INTO context_items ({ITEM_COLS}) VALUES (%s,%s,%s,%s,%s,%s)",
                [r[2] for r in chunk],
            )
            conn.commit()
    return len(rows) / (time.perf_counter() - started)


def _copy_run(conn: psycopg.Connection, rows: list[tuple[tuple, tuple, tuple]]) -> float:
    started = time.perf_counter()
    with conn.cursor() as cur:
        for start in range(0, len(rows), BATCH):
            chunk = rows[start : start + BATCH]
            for table, cols, idx in (
                ("messages", MSG_COLS, 0),
                ("message_parts", PART_COLS, 1),
                ("context_items", ITEM_COLS, 2),
            ):
                with cur.copy(f"COPY {table} ({cols}) FROM STDIN") as copy:
                    for r in chunk:
                        copy.write_row(r[idx])
            conn.commit()
    return len(rows) / (time.perf_counter() - started)


def _median(label: str, runs: list[float]) -> float:
    med = statistics.median(runs)
    spread = ", ".join(f"{r:,.0f}" for r in runs)
    print(f"  {label:<28} median {med:>9,.0f} msg/s   (runs: {spread})", flush=True)
    return med


def run(args: argparse.Namespace) -> None:
    n, repeat = args.messages, args.repeat
    print(
        f"  {n:,} messages per run, batches of {BATCH}, one transaction per batch, {repeat} runs",
        flush=True,
    )
    with postgres() as url:
        off, sender = Settings(database_url=url), _Sender()
        with_semantic = off.model_copy(update={"semantic": True})
        database = Database(off)
        with database.session() as session:
            tenant_id = create_tenant(session, "bench").tenant_id
            session.commit()
        database.dispose()
        raw = psycopg.connect(url.replace("postgresql+psycopg", "postgresql"))
        first_ids = iter(range(10_000_000, 10**9, n))

        def by_hand(name: str, fn: Any) -> Callable[[int], float]:
            def one(r: int) -> float:
                conv = _setup_conversation(raw, tenant_id, f"{name}-{r}")
                return float(fn(raw, _rows(n, tenant_id, conv, next(first_ids))))

            return one

        contenders: list[tuple[str, Callable[[int], float]]] = [
            ("lcm", lambda r: _lcm_run(off, _Sender(), tenant_id, n, r)),
            ("semantic", lambda r: _lcm_run(with_semantic, sender, tenant_id, n, r + repeat)),
            ("executemany", by_hand("executemany", _executemany_run)),
            ("copy", by_hand("copy", _copy_run)),
        ]
        # A warm-up run of each, then ANALYZE, not measured: psycopg prepares
        # a statement after five runs, and a plan prepared on the empty tables
        # (no statistics) stays until autovacuum's ANALYZE invalidates it; the
        # first contender's first three runs were 2x slower for it.
        for _name, one in contenders:
            one(1000)  # conversations of their own
        raw.execute("ANALYZE")
        raw.commit()
        figures: dict[str, list[float]] = {name: [] for name, _ in contenders}
        for r in range(repeat):
            # Interleaved so machine noise hits every contender alike, the
            # order turned every round, each run on a settled database
            # (_settle): the run after another's 20,000 rows paid for their
            # autovacuum, 1.2-1.9x slower, whichever contender it was.
            turn = r % len(contenders)
            for name, one in contenders[turn:] + contenders[:turn]:
                _settle(raw)
                figures[name].append(one(r))
        lcm = _median("lcm ingest_messages", figures["lcm"])
        on = _median("lcm, LCM_SEMANTIC=on", figures["semantic"])
        print(f"  semantic on/off: {on / lcm:.2f} ({sender.sent} embed jobs sent)", flush=True)
        many = _median("psycopg executemany", figures["executemany"])
        copy = _median("psycopg COPY", figures["copy"])
        print(f"  ratio lcm/executemany: {lcm / many:.2f}   lcm/COPY: {lcm / copy:.2f}", flush=True)
        raw.close()

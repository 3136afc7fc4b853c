"""Compaction and assembly costs on Postgres (issue: the LCM core).

* **Leaf-pass database overhead** at conversations of 1k / 10k / 100k messages,
  with an instant summarizer so only our own work is timed: reading the
  context (in a lookup session, as a serving process does) and planning,
  then the commit transaction (range check, summary, links, range
  replacement, run and usage rows). What runs between the two (rendering
  the source, the summarizer) is printed apart, as it is not database work.
  The history is built in the steady state a long conversation reaches:
  older messages already under leaf and condensed summaries, a raw tail
  after them. Flat is the goal.
* **Assembly**: a 20,000-message conversation never compacted (the worst
  case for the windowed read), and a compacted one of ~100 context items.
  The reference is one ``SELECT`` of the same context rows.
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import insert, select, text
from sqlalchemy.orm import Session

from bench.servers import postgres
from lcm.assembly.service import assemble
from lcm.compaction.engine import CompactionEngine
from lcm.compaction.repository import CompactionRepository
from lcm.compaction.sweep import next_pass
from lcm.content import IncomingMessage
from lcm.db.engine import Database
from lcm.db.models import (
    ContextItem,
    Conversation,
    Message,
    MessagePart,
    Summary,
    SummaryMessage,
    SummaryParent,
)
from lcm.ingest.service import ingest_messages, prepare_batch
from lcm.settings import Settings
from lcm.summarize.provider import Completion, SummaryRequest
from lcm.summarize.summarizer import Summarizer
from lcm.tenants.service import create_tenant

BODY = "Checked src/api/handler.py: the retry loop now backs off (attempt {i}). " * 6


class InstantProvider:
    """A provider that answers at once, so a pass times only the database work."""

    def complete(self, request: SummaryRequest) -> Completion:
        return Completion(
            "Summary of the span.\nExpand for details about: retries", "instant", 10, 10
        )


def _ms(seconds: float) -> float:
    return seconds * 1000


class _TransactionClock:
    """The engine's transaction factory, timed: a pass's commit is what runs in it.

    Not the pass's ``duration_ms``: that is whole milliseconds, and the
    instant summarizer's share of a pass is less than one.
    """

    def __init__(self, transaction: Callable[[], AbstractContextManager[Session]]) -> None:
        self.transaction = transaction
        self.spent: list[float] = []

    @contextmanager
    def __call__(self) -> Iterator[Session]:
        started = time.perf_counter()
        try:
            with self.transaction() as session:
                yield session
        finally:
            self.spent.append(time.perf_counter() - started)


def build_history(
    db: Database, tenant_id: str, key: str, messages: int, raw_tail: int = 200
) -> int:
    """A conversation of ``messages`` messages, all but the newest ``raw_tail`` summarized."""
    with db.transaction() as s:
        conv = Conversation(tenant_id=tenant_id, session_key=key)
        s.add(conv)
        s.flush()
        cid = conv.id
    start = datetime(2026, 1, 1, tzinfo=UTC)
    summarized = messages - raw_tail
    with db.transaction() as s:
        ids = list(
            s.execute(
                insert(Message).returning(Message.id, sort_by_parameter_order=True),
                [
                    {
                        "tenant_id": tenant_id,
                        "conversation_id": cid,
                        "seq": i + 1,
                        "role": "user" if i % 2 == 0 else "assistant",
                        "content": BODY.format(i=i),
                        "content_shape": "text",
                        "token_count": 180,
                        "created_at": start + timedelta(seconds=i),
                    }
                    for i in range(messages)
                ],
            ).scalars()
        )
        s.execute(
            insert(MessagePart),
            [
                {
                    "tenant_id": tenant_id,
                    "message_id": mid,
                    "ordinal": 0,
                    "part_type": "text",
                    "text": BODY.format(i=i),
                    "payload": {"type": "text", "text": BODY.format(i=i)},
                }
                for i, mid in enumerate(ids)
            ],
        )
        level = _summaries(s, tenant_id, cid, start, ids[:summarized], depth=0, fanout=16)
        depth = 1
        while len(level) > 8:
            level = _condense(s, tenant_id, cid, start, level, depth, fanout=4)
            depth += 1
        items = [
            {
                "tenant_id": tenant_id,
                "conversation_id": cid,
                "ordinal": n + 1,
                "item_type": "summary",
                "summary_id": sid,
                "token_count": 120,
            }
            for n, sid in enumerate(level)
        ]
        items += [
            {
                "tenant_id": tenant_id,
                "conversation_id": cid,
                "ordinal": len(level) + n + 1,
                "item_type": "message",
                "message_id": mid,
                "token_count": 180,
            }
            for n, mid in enumerate(ids[summarized:])
        ]
        s.execute(insert(ContextItem), items)
        s.execute(
            text("UPDATE conversations SET last_seq = :n, last_ordinal = :o WHERE id = :c"),
            {"n": messages, "o": len(items), "c": cid},
        )
    return cid


def _summary_row(
    tenant_id: str, cid: int, start: datetime, depth: int, covered: int
) -> dict[str, Any]:
    return {
        "id": "sum_" + secrets.token_hex(8),
        "tenant_id": tenant_id,
        "conversation_id": cid,
        "kind": "leaf" if depth == 0 else "condensed",
        "depth": depth,
        "content": "A summary.",
        "token_count": 100,
        "source_token_count": 1000,
        "earliest_at": start,
        "latest_at": start,
        "descendant_count": covered,
        "file_ids": [],
        "escalation": "normal",
        "model": "instant",
    }


def _summaries(
    s: Any, tenant_id: str, cid: int, start: datetime, ids: list[int], depth: int, fanout: int
) -> list[str]:
    rows, links = [], []
    for n in range(0, len(ids), fanout):
        row = _summary_row(tenant_id, cid, start, depth, len(ids[n : n + fanout]))
        rows.append(row)
        links += [
            {"summary_id": row["id"], "message_id": mid, "tenant_id": tenant_id, "ordinal": k}
            for k, mid in enumerate(ids[n : n + fanout])
        ]
    s.execute(insert(Summary), rows)
    s.execute(insert(SummaryMessage), links)
    return [r["id"] for r in rows]


def _condense(
    s: Any, tenant_id: str, cid: int, start: datetime, children: list[str], depth: int, fanout: int
) -> list[str]:
    rows, links = [], []
    for n in range(0, len(children), fanout):
        row = _summary_row(tenant_id, cid, start, depth, 0)
        rows.append(row)
        links += [
            {"summary_id": row["id"], "parent_id": child, "tenant_id": tenant_id, "ordinal": k}
            for k, child in enumerate(children[n : n + fanout])
        ]
    s.execute(insert(Summary), rows)
    s.execute(insert(SummaryParent), links)
    return [r["id"] for r in rows]


def _leaf_passes(
    db: Database,
    clock: _TransactionClock,
    engine: CompactionEngine,
    settings: Settings,
    tenant_id: str,
    cid: int,
    key: str,
    repeat: int,
) -> tuple[list[float], list[float], list[float]]:
    """Per pass: the read and planning, the commit transaction, and the rest.

    ``clock`` is ``engine``'s transaction factory.
    """
    plans, commits, rest = [], [], []
    # One pass more than measured, the first dropped, as _assembly does: the
    # first pass after a history is built runs on cold caches. (A serving
    # worker's statements are also prepared: psycopg prepares a statement
    # on its fifth run on a connection; run() warms them before measuring.)
    for r in range(repeat + 1):
        new = [
            IncomingMessage("user" if i % 2 == 0 else "assistant", BODY.format(i=i))
            for i in range(120)
        ]
        with db.transaction() as s:
            ingest_messages(
                s, tenant_id, key, None, prepare_batch(new, max_batch=1000, max_chars=10**6)
            )
        clock.spent.clear()
        started = time.perf_counter()
        plan = next_pass(engine.load(cid), settings, 200_000)
        planned = time.perf_counter()
        assert plan is not None, f"run {r}: no pass planned"
        assert plan.kind == "leaf", f"run {r}: no leaf pass planned"
        engine.run_pass(tenant_id, cid, plan, settings)
        done = time.perf_counter()
        assert len(clock.spent) == 1, f"run {r}: {len(clock.spent)} transactions, not 1"
        commit = clock.spent[0]
        plans.append(_ms(planned - started))  # the read and planning
        commits.append(_ms(commit))
        rest.append(_ms(done - planned - commit))
    return plans[1:], commits[1:], rest[1:]


def _assembly(db: Database, settings: Settings, cid: int, budget: int, repeat: int) -> list[float]:
    """Assembly times, its window read each time as after a turn's ingest: the
    process's window cache (lcm/window_cache.py) is told to forget it first."""
    times = []
    for _ in range(repeat + 1):
        if db.window_cache is not None:
            db.window_cache.forget_conversations([cid])
        started = time.perf_counter()
        with db.session() as s:
            assemble(s, cid, budget, settings)
        times.append(_ms(time.perf_counter() - started))
    return times[1:]  # the first run warms the connection and caches


def _analyze(db: Database) -> None:
    """Fresh planner statistics, as autovacuum keeps them on a serving database.

    Without them a history built seconds ago is planned as nearly empty (a
    hash join over every summary), and the smallest history, measured
    soonest after it is built, reads slowest.
    """
    with db.transaction() as s:
        s.execute(text("ANALYZE"))


def _commit_floor(db: Database, cid: int, repeat: int) -> list[float]:
    """The cheapest durable write: one row updated and committed (fsync on), timed."""
    times = []
    for _ in range(repeat * 4):
        started = time.perf_counter()
        with db.transaction() as s:
            s.execute(
                text("UPDATE conversations SET context_version = context_version WHERE id = :c"),
                {"c": cid},
            )
        times.append(_ms(time.perf_counter() - started))
    return times


def _select_reference(db: Database, cid: int, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        with db.session() as s:
            s.execute(
                select(ContextItem.ordinal, Message.content)
                .join(Message, Message.id == ContextItem.message_id)
                .where(ContextItem.conversation_id == cid)
            ).all()
        times.append(_ms(time.perf_counter() - started))
    return statistics.median(times)


def run(args: argparse.Namespace) -> None:
    repeat = args.repeat
    sizes = [int(x) for x in args.sizes.split(",")]
    with postgres() as url:
        settings = Settings(database_url=url)
        db = Database(settings)
        with db.transaction() as s:
            tenant_id = create_tenant(s, "bench").tenant_id
        clock = _TransactionClock(db.transaction)
        # As a serving process builds it: the context read in a lookup session.
        engine = CompactionEngine(clock, Summarizer(InstantProvider()), reads=db.lookup_session)
        print("  leaf pass, database work only (instant summarizer), median of", repeat)
        floor_cid = build_history(db, tenant_id, "floor", 300)
        floor = statistics.median(_commit_floor(db, floor_cid, repeat))
        # Warm, unmeasured: five passes prepare every statement of a pass.
        _leaf_passes(db, clock, engine, settings, tenant_id, floor_cid, "floor", 5)
        print(f"  reference: a one-row UPDATE + COMMIT takes {floor:.1f} ms", flush=True)
        print("  (each size's ratio is to the reference measured just before and after it)")
        for size in sizes:
            started = time.perf_counter()
            cid = build_history(db, tenant_id, f"hist-{size}", size)
            _analyze(db)
            with db.session() as s:
                items = len(CompactionRepository(s).load_entries(cid))
            built = time.perf_counter() - started
            # The reference again on either side of the passes: this machine's
            # speed drifts over a run by more than the passes differ by size.
            floors = _commit_floor(db, floor_cid, repeat)
            plans, commits, rest = _leaf_passes(
                db, clock, engine, settings, tenant_id, cid, f"hist-{size}", repeat
            )
            floor = statistics.median(floors + _commit_floor(db, floor_cid, repeat))
            total = [p + c for p, c in zip(plans, commits, strict=True)]
            print(
                f"  {size:>7,} messages ({items} context items; built in {built:.0f} s): "
                f"read+plan {statistics.median(plans):5.1f} ms, commit "
                f"{statistics.median(commits):5.1f} ms, total "
                f"{statistics.median(total):5.1f} ms = {statistics.median(total) / floor:.1f}x the "
                f"reference ({floor:.2f} ms); "
                f"between them (source, summarizer) {statistics.median(rest):.1f} ms",
                flush=True,
            )
        print("  assembly, median of", repeat)
        raw = _raw_conversation(db, tenant_id, 20_000)
        reference = _select_reference(db, raw, repeat)
        for budget in (20_000, 100_000):
            med = statistics.median(_assembly(db, settings, raw, budget, repeat))
            print(
                f"  20,000 raw messages, budget {budget:>7,}: {med:6.1f} ms  "
                f"(reference: one SELECT of all 20,000 rows {reference:.1f} ms)",
                flush=True,
            )
        compacted = build_history(db, tenant_id, "compacted", 4_000, raw_tail=92)
        with db.session() as s:
            items = len(CompactionRepository(s).load_entries(compacted))
        med = statistics.median(_assembly(db, settings, compacted, 200_000, repeat))
        print(f"  compacted, {items} context items, budget 200,000: {med:6.1f} ms", flush=True)
        db.dispose()


def _raw_conversation(db: Database, tenant_id: str, messages: int) -> int:
    cid = 0
    for start in range(0, messages, 1000):
        batch = [
            IncomingMessage("user" if i % 2 == 0 else "assistant", BODY.format(i=i))
            for i in range(start, start + 1000)
        ]
        with db.transaction() as s:
            cid = ingest_messages(
                s, tenant_id, "raw-20k", None, prepare_batch(batch, max_batch=1000, max_chars=10**6)
            ).conversation_id
    return cid

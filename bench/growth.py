"""How each operation's cost grows with the work (issue 37, item 3).

Two curves on Postgres (fsync on; ``--embedded``: a SQLite file, its search
backlog drained after each load as ``lcm serve`` would), every figure a median of ``--repeat``
runs after a warm-up, quoted as a ratio to a one-row primary-key read
(``SELECT content FROM messages WHERE id = …`` in its own session) measured
just before and after each point of the curve:

* **conversation length** (``--sizes``, default 1k,10k,100k): at each size a
  never-compacted conversation and a compacted one of that many messages are
  written (``bench.growth_seed``), measured, then erased (the erase is timed:
  it removes every row, so its cost per message is what should stay flat);
* **table size** (``--tables``, default none; e.g. ``1m,10m``): conversations
  of ``--table-conversation`` messages measured among 10,000 other
  conversations of the same tenant holding that many messages in all.

Operations: a turn's ingest (two messages) and assembly (raw at a 100k-token
budget, compacted at 200k); grep in the conversation (full text by relevance,
regex by recency); describe of a depth-1 summary (a fixed subtree: 64
messages) and of the top summary (its subtree grows with the conversation);
expand of a depth-1 summary at a 4,000-token cap; a leaf pass and a condensed pass
(database work: the context read and plan, then the commit; the summarizer
answers at once); erase. ``--memory`` adds the resident memory of ``lcm api``
and a Celery worker (``lcm serve`` with ``--embedded``) before and after they
serve a hundred conversations (``bench.growth_memory``); ``--plans`` prints the
executed plans of grep's queries at each point (``bench.growth_plans``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from sqlalchemy import select, text

from bench.compaction import InstantProvider, _leaf_passes, _TransactionClock
from bench.growth_bulk import bulk_load, settle
from bench.growth_memory import report_memory, report_serve_memory
from bench.growth_plans import print_plans
from bench.growth_seed import Seeder
from bench.servers import postgres
from lcm.assembly.service import assemble
from lcm.compaction.engine import CompactionEngine
from lcm.compaction.planning import shallowest_condensation
from lcm.content import IncomingMessage
from lcm.db.engine import Database
from lcm.db.migrate import upgrade
from lcm.db.models import Message, Summary
from lcm.erasure.service import erase_conversation
from lcm.ingest.service import ingest_messages, prepare_batch
from lcm.retrieval.describe import describe
from lcm.retrieval.expand import expand
from lcm.retrieval.grep import GrepLimits, GrepQuery, grep
from lcm.retrieval.search_backlog import index_search_backlog
from lcm.retrieval.search_rows import Bounds
from lcm.settings import Settings
from lcm.summarize.summarizer import Summarizer
from lcm.tenants.service import create_tenant
from tests import servers

FILLER_CONVERSATIONS = 10_000
QUERIES = {
    "grep full_text": GrepQuery("payments rollback", "full_text", "messages", "relevance", 50),
    "grep regex": GrepQuery(r"timeout after \d+ ms", "regex", "messages", "recency", 50),
}
LIMITS = GrepLimits(timeout_ms=600_000, max_pattern_chars=1_000, half_life_hours=168)
TURN = [
    IncomingMessage("user", "Deploy the cache server again?"),
    IncomingMessage("assistant", "Done."),
]


def parse_count(value: str) -> int:
    """``1k`` → 1,000, ``10m`` → 10,000,000, ``500`` → 500."""
    scale = {"k": 1_000, "m": 1_000_000}.get(value[-1:].lower(), 1)
    return int(float(value[:-1] if scale > 1 else value) * scale)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tables",
        default="",
        help="growth: table sizes (messages across 10,000 conversations), e.g. 1m,10m",
    )
    parser.add_argument(
        "--table-conversation",
        default="10k",
        help="growth: length of the conversations measured at each table size",
    )
    parser.add_argument(
        "--memory", action="store_true", help="growth: resident memory of lcm api and a worker"
    )
    # The semantic scenario adds --plans first: one flag, read by both.
    with contextlib.suppress(argparse.ArgumentError):
        parser.add_argument(
            "--plans", action="store_true", help="growth: print grep's query plans (Postgres)"
        )


@dataclass
class Point:
    """What one point of a curve measures: its conversations, keys and summary ids."""

    label: str
    raw: int
    compacted: int
    compacted_key: str
    top_summary: str = ""
    depth1_summary: str = ""
    figures: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what the work returned: its size


class Bench:
    """One database, one tenant, the engine a worker builds, and the reference read."""

    def __init__(self, url: str, repeat: int) -> None:
        self.settings = Settings(database_url=url, broker_url="memory://")
        self.sqlite = url.startswith("sqlite")
        self.db = Database(self.settings)
        with self.db.transaction() as s:
            issued = create_tenant(s, "bench-growth")
        self.tenant_id, self.api_key = issued.tenant_id, issued.api_key
        self.repeat = repeat
        self.timings: dict[str, float] = {}
        self.plans = False  # print grep's plans at each point (bench.growth_plans)
        self.clock = _TransactionClock(self.db.transaction)
        self.engine = CompactionEngine(
            self.clock, Summarizer(InstantProvider()), reads=self.db.lookup_session
        )

    def seed(self, work: Callable[[Seeder], object], bulk: bool) -> float:
        """Run ``work`` in one transaction (a bulk load on Postgres: ``bench.growth_bulk``);
        seconds. ``self.timings`` holds where they went."""
        started = time.perf_counter()
        with self.db.engine.connect() as conn:
            seeder = Seeder(conn, self.tenant_id)
            with bulk_load(conn, bulk, seeder.timings):
                work(seeder)
            with seeder.timed("commit"):
                conn.commit()
        if self.sqlite:  # what a fresh lcm serve does first
            with seeder.timed("search backlog"):
                index_search_backlog(self.db.transaction)
        elif bulk:
            settle(self.db.engine, seeder.timings)
        self.timings = seeder.timings
        return time.perf_counter() - started

    def median(self, call: Callable[[], object], repeat: int | None = None) -> float:
        call()  # warm: plans, caches, prepared statements
        runs = []
        for _ in range(repeat or self.repeat):
            started = time.perf_counter()
            call()
            runs.append((time.perf_counter() - started) * 1000)
        return statistics.median(runs)

    def pk_read(self, message_id: int) -> float:
        def read() -> object:
            with self.db.session() as s:
                return s.execute(select(Message.content).where(Message.id == message_id)).one()

        return self.median(read, max(50, self.repeat * 10))

    def find_summaries(self, point: Point) -> None:
        with self.db.session() as s:
            point.top_summary = s.execute(
                select(Summary.id)
                .where(Summary.conversation_id == point.compacted)
                .order_by(Summary.depth.desc())
                .limit(1)
            ).scalar_one()
            point.depth1_summary = s.execute(
                select(Summary.id)
                .where(Summary.conversation_id == point.compacted, Summary.depth == 1)
                .limit(1)
            ).scalar_one()
            s.execute(text("ANALYZE"))
            s.commit()

    def measure(self, point: Point) -> None:
        """Every operation at ``point``, each against the reference read around it."""
        with self.db.session() as s:
            some_id = s.execute(
                select(Message.id).where(Message.conversation_id == point.raw).limit(1)
            ).scalar_one()
        before = self.pk_read(some_id)
        f = point.figures
        f["ingest turn"] = self.median(partial(self._ingest, point.compacted_key))
        f["assemble raw"] = self.median(partial(self._assemble, point.raw, 100_000))
        f["assemble compacted"] = self.median(partial(self._assemble, point.compacted, 200_000))
        f["turn (ingest + assemble compacted)"] = f["ingest turn"] + f["assemble compacted"]
        for name, query in QUERIES.items():
            f[name] = self.median(partial(self._grep, point.raw, query))
        f["describe (depth 1)"] = self.median(partial(self._describe, point.depth1_summary))
        f["describe (top summary)"] = self.median(partial(self._describe, point.top_summary))
        f["expand (depth 1)"] = self.median(partial(self._expand, point.depth1_summary))
        plans, commits, _rest = _leaf_passes(
            self.db, self.clock, self.engine, self.settings, self.tenant_id,
            point.compacted, point.compacted_key, self.repeat,
        )  # fmt: skip
        f["leaf pass (db work)"] = statistics.median(
            p + c for p, c in zip(plans, commits, strict=True)
        )
        f["condensed pass (db work)"] = statistics.median(self._condensed_passes(point.compacted))
        f["reference: pk read"] = statistics.median([before, self.pk_read(some_id)])
        point.notes = [
            f"assembled raw {self._assemble(point.raw, 100_000)} messages",
            f"compacted {self._assemble(point.compacted, 200_000)}",
            *(f"{name} {self._grep(point.raw, q)} matches" for name, q in QUERIES.items()),
        ]

    def _ingest(self, key: str) -> None:
        with self.db.transaction() as s:
            ingest_messages(
                s, self.tenant_id, key, None, prepare_batch(TURN, max_batch=10, max_chars=10**4)
            )

    def _assemble(self, cid: int, budget: int) -> int:
        with self.db.session() as s:
            return len(assemble(s, cid, budget, self.settings).messages)

    def _grep(self, cid: int, query: GrepQuery) -> int:
        with self.db.session() as s:
            return len(grep(s, Bounds(self.tenant_id, (cid,)), query, LIMITS).matches)

    def _describe(self, summary_id: str) -> None:
        with self.db.session() as s:
            describe(s, self.tenant_id, summary_id)

    def _expand(self, summary_id: str) -> None:
        with self.db.session() as s:
            expand(s, self.tenant_id, [summary_id], 4_000)

    def _condensed_passes(self, cid: int) -> list[float]:
        """Condensed passes over 4 uncondensed leaves each: the read and plan, then the commit."""
        times = []
        for _ in range(self.repeat + 1):
            self.clock.spent.clear()
            started = time.perf_counter()
            entries = self.engine.load(cid)
            first = next(i for i, e in enumerate(entries) if e.summary_depth == 0)
            plan = shallowest_condensation(
                entries[: first + 4],
                self.settings,
                fanout=4,
                max_result_depth=None,
                phase="routine",
            )
            planned = time.perf_counter()
            assert plan is not None
            assert plan.kind == "condensed"
            self.engine.run_pass(self.tenant_id, cid, plan, self.settings)
            assert len(self.clock.spent) == 1
            times.append((planned - started + self.clock.spent[0]) * 1000)
        return times[1:]

    def database_bytes(self) -> int:
        if self.sqlite:
            return Path(self.db.engine.url.database or "").stat().st_size
        with self.db.session() as s:
            return int(s.execute(text("SELECT pg_database_size(current_database())")).scalar_one())

    def erase(self, cid: int) -> float:
        started = time.perf_counter()
        with self.db.transaction() as s:
            erase_conversation(s, self.tenant_id, cid)
        return (time.perf_counter() - started) * 1000


def _point(bench: Bench, size: int, label: str) -> Point:
    """Write a raw and a compacted conversation of ``size`` messages, measure, erase them."""
    ids: list[int] = []

    def write(seeder: Seeder) -> None:
        ids.extend(seeder.raw([f"raw-{label}"], size))
        ids.append(seeder.compacted(f"compacted-{label}", size))

    seconds = bench.seed(write, bulk=size >= 100_000)
    point = Point(label, ids[0], ids[1], f"compacted-{label}")
    print(f"  {label}: written in {seconds:.0f} s", flush=True)
    _print_timings(bench.timings)
    bench.find_summaries(point)
    bench.measure(point)
    if bench.plans and not bench.sqlite:
        print_plans(bench.db, Bounds(bench.tenant_id, (point.raw,)), QUERIES, LIMITS)
    point.figures["erase raw, per 1k messages"] = bench.erase(point.raw) * 1000 / size
    point.figures["erase compacted, per 1k messages"] = bench.erase(point.compacted) * 1000 / size
    _print_point(point)
    return point


def _table_curve(bench: Bench, tables: list[int], size: int) -> list[Point]:
    """The same measurements at ``size`` messages while the tenant's other rows grow."""
    points = [_point(bench, size, f"{size:,} msgs, table base")]
    cids: list[int] = []
    held = 0
    for total in tables:
        per_conv = total // FILLER_CONVERSATIONS - held

        def grow(seeder: Seeder, per_conv: int = per_conv, held: int = held) -> None:
            if not cids:
                keys = [f"filler-{n}" for n in range(FILLER_CONVERSATIONS)]
                cids.extend(seeder.raw(keys, per_conv))
            else:
                seeder.extend(cids, held, per_conv)

        seconds = bench.seed(grow, bulk=True)
        held += per_conv
        print(
            f"  table grown to {held * FILLER_CONVERSATIONS:,} messages in "
            f"{FILLER_CONVERSATIONS:,} conversations in {seconds:.0f} s "
            f"({bench.database_bytes() / 2**30:.1f} GiB database)",
            flush=True,
        )
        _print_timings(bench.timings)
        points.append(_point(bench, size, f"{size:,} msgs, table {total:,}"))
    return points


def _print_timings(timings: dict[str, float]) -> None:
    """Where a load's seconds went (the statements, rebuilds and steps over a second)."""
    slow = [f"{what} {seconds:.0f} s" for what, seconds in timings.items() if seconds >= 1]
    if slow:
        print(f"     ({'; '.join(slow)})", flush=True)


def _print_point(point: Point) -> None:
    reference = point.figures["reference: pk read"]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"  -- {point.label} (reference: pk read {reference:.2f} ms; {', '.join(point.notes)})")
    print(f"     load average {load}")
    for name, ms in point.figures.items():
        print(f"     {name:<40} {ms:9.2f} ms {ms / reference:9.1f}x", flush=True)


def _summary(title: str, points: list[Point]) -> None:
    """One row per operation: the ratio at each point, and last over first."""
    if not points:
        return
    print(f"  {title}: ratio to the pk read (last/first)")
    print("  " + " | ".join(["operation", *(p.label for p in points), "last/first"]))
    for name in points[0].figures:
        ratios = [p.figures[name] / p.figures["reference: pk read"] for p in points]
        cells = [f"{r:.1f}x" for r in ratios]
        print("  " + " | ".join([name, *cells, f"{ratios[-1] / ratios[0]:.2f}"]), flush=True)


def _curves(bench: Bench, args: argparse.Namespace) -> None:
    sizes = [parse_count(x) for x in args.sizes.split(",") if x]
    tables = sorted(parse_count(x) for x in args.tables.split(",") if x)
    bench.plans = args.plans
    length = [_point(bench, size, f"{size:,} msgs") for size in sizes]
    table = _table_curve(bench, tables, parse_count(args.table_conversation)) if tables else []
    _summary("conversation length", length)
    _summary("table size", table)


def run(args: argparse.Namespace) -> None:
    if args.embedded:
        _run_embedded(args)
        return
    with postgres(bulk=True) as url:
        bench = Bench(url, args.repeat)
        try:
            _curves(bench, args)
            if args.memory:
                report_memory(bench.seed, bench.api_key, url)
        finally:
            bench.db.dispose()


def _run_embedded(args: argparse.Namespace) -> None:
    """The same curves on an embedded SQLite file; ``--memory``: ``lcm serve`` on it after."""
    home = servers.make_workdir() / "home"
    home.mkdir()
    url = f"sqlite:///{home / 'lcm.db'}"
    upgrade(url)
    bench = Bench(url, args.repeat)
    try:
        _curves(bench, args)
        if args.memory:
            report_serve_memory(bench.seed, bench.api_key, home)
    finally:
        bench.db.dispose()
        shutil.rmtree(home.parent, ignore_errors=True)

"""How long one big ``/messages`` batch holds SQLite's write lock, before and after 0010.

Before (migration 0002's triggers, restored by downgrading 0010): each new
message is indexed into FTS5 and the trigram table inside the ingest
transaction. After (0010): the ingest only records backlog rows, and the
drain indexes them afterwards, a short transaction per chunk. Two SQLite
files, runs interleaved; each run ingests one batch of 1,000 messages into a
new conversation through lcm's own write path, in one transaction (as the
route does). Figures, median of ``--repeat`` runs:

* ``ingest``: the ingest transaction, first statement to commit: the time
  the write lock is held and every other writer waits;
* ``drain`` (after only): indexing the batch's backlog, all chunks, a chunk's
  median and its longest: what another writer may wait behind the drain.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy.orm import Session

from lcm.content import IncomingMessage
from lcm.db.engine import Database
from lcm.db.migrate import downgrade, upgrade
from lcm.ingest.service import ingest_messages, prepare_batch
from lcm.retrieval.search_backlog import index_search_backlog
from lcm.settings import Settings
from lcm.tenants.service import create_tenant

BATCH = 1_000
SIZES = {"1,000 x 2 KB": 2_000, "1,000 x 15 KB": 15_000}


def _vocabulary(rng: random.Random, size: int = 50_000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choices(letters, k=rng.randint(2, 11))) for _ in range(size)]


def _batch(size: int, rng: random.Random, vocabulary: list[str], run: int) -> list[IncomingMessage]:
    """Text shaped like prose: Zipf-distributed words (index work grows with distinct terms)."""
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]
    messages = []
    for i in range(BATCH):
        words = rng.choices(vocabulary, weights, k=size // 5)
        messages.append(IncomingMessage("user", " ".join(words)[:size], f"r{run}-{i}"))
    return messages


def _ingest(database: Database, tenant_id: str, key: str, batch: list[IncomingMessage]) -> float:
    prepared = prepare_batch(batch, max_batch=BATCH, max_chars=10**7)
    with database.session() as session:
        started = time.perf_counter()  # BEGIN IMMEDIATE comes with the first statement
        ingest_messages(session, tenant_id, key, None, prepared)
        session.commit()
        return time.perf_counter() - started


class _TimedTransactions:
    """``Database.transaction``, recording how long each chunk's transaction took."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self.seconds: list[float] = []

    @contextmanager
    def __call__(self) -> Iterator[Session]:
        started = time.perf_counter()
        with self.database.transaction() as session:
            yield session
        self.seconds.append(time.perf_counter() - started)


def run(args: argparse.Namespace) -> None:
    repeat = args.repeat
    rng = random.Random(11)
    vocabulary = _vocabulary(rng)
    with tempfile.TemporaryDirectory() as tmp:
        databases: dict[str, Database] = {}
        tenants: dict[str, str] = {}
        for name in ("before", "after"):
            url = f"sqlite:///{Path(tmp) / name}.db"
            upgrade(url)
            if name == "before":
                downgrade(url, "0009")  # 0002's triggers: indexing inside the ingest
            databases[name] = Database(Settings(database_url=url))
            with databases[name].transaction() as session:
                tenants[name] = create_tenant(session, "bench").tenant_id
        for label, size in SIZES.items():
            ingest: dict[str, list[float]] = {"before": [], "after": []}
            drain: list[float] = []
            longest_chunk: list[float] = []
            typical_chunk: list[float] = []
            for r in range(repeat):
                batch = _batch(size, rng, vocabulary, r)
                for name, database in databases.items():
                    ingest[name].append(_ingest(database, tenants[name], f"{label}-{r}", batch))
                timed = _TimedTransactions(databases["after"])
                started = time.perf_counter()
                index_search_backlog(timed)
                drain.append(time.perf_counter() - started)
                longest_chunk.append(max(timed.seconds))
                typical_chunk.append(statistics.median(timed.seconds))
            print(
                f"  {label}: write lock held by the ingest: before "
                f"{statistics.median(ingest['before']):.2f} s, after "
                f"{statistics.median(ingest['after']):.2f} s; drain after commit "
                f"{statistics.median(drain):.2f} s in {len(timed.seconds)} chunks of "
                f"{statistics.median(typical_chunk) * 1000:.0f} ms, longest "
                f"{statistics.median(longest_chunk) * 1000:.0f} ms "
                f"(median of {repeat})",
                flush=True,
            )
        for database in databases.values():
            database.dispose()

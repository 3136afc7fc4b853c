"""A fair wake-up's choice of tenant on Postgres, among many tenants (issue: gateway scale).

Every compaction pass starts with a wake-up that picks the least recently
served tenant with due debt (``lcm/compaction/fairness_repository.py``).
It looks among the tenants flagged as owing (``tenants.compaction_due``,
migration 0017), walking a partial index in served order; before the flag it
joined every tenant with the owed rows, and its cost grew with both. Figures
for 100,000 tenants and a million debt rows:

* 100 tenants owe 1,000 passes (the usual backlog: a few tenants busy);
* every tenant owes one pass (100,000: a backlog after an outage);

each under Postgres's default ``random_page_cost = 4`` and under 1.1, the
value for data that sits in memory or on SSD (README: Operations). The
reference is a durable one-row UPDATE in the same run.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import event, text

from bench.servers import postgres
from lcm.compaction.fairness_repository import FairQueueRepository
from lcm.db.engine import Database
from lcm.db.models import utcnow
from lcm.settings import Settings

TENANTS = 100_000
CONVERSATIONS = 1_000_000  # ten per tenant, each with a debt row
BACKLOGS = (
    ("100 tenants owe 1,000 passes", "conversation_id % 100000 < 100"),
    ("every tenant owes one pass", "conversation_id <= 100000"),
)
PAGE_COSTS = ("4", "1.1")


def run(args: argparse.Namespace) -> None:
    repeat = max(5, args.repeat)
    with postgres() as url:
        _seed(url)
        print(f"  {TENANTS:,} tenants, {CONVERSATIONS:,} debt rows, median of {repeat}")
        for label, owing in BACKLOGS:
            _owe(url, owing)
            for cost in PAGE_COSTS:
                choice = _median(url, cost, repeat, _choose)
                print(f"  {label}, random_page_cost {cost:>3}: {choice:7.2f} ms", flush=True)
        reference = _median(url, PAGE_COSTS[0], repeat, _durable_update)
        print(f"  reference, a durable one-row UPDATE:      {reference:7.2f} ms")


def _seed(url: str) -> None:
    db = Database(Settings(database_url=url))
    with db.transaction() as s:
        s.execute(
            text(
                "INSERT INTO tenants (id, name, created_at, settings_overrides, "
                "compaction_claimed_at) SELECT 't' || g, 't' || g, now(), '{}', "
                "now() - g * interval '1 s' FROM generate_series(1, :n) g"
            ),
            {"n": TENANTS},
        )
        s.execute(
            text(
                "INSERT INTO conversations (tenant_id, session_key, created_at, "
                "context_version, last_seq, last_ordinal) SELECT 't' || (g % :t + 1), "
                "'k' || g, now(), 0, 0, 0 FROM generate_series(1, :n) g"
            ),
            {"t": TENANTS, "n": CONVERSATIONS},
        )
        s.execute(
            text(
                "INSERT INTO compaction_debt (conversation_id, tenant_id, reason, status, "
                "attempts, fencing_token, rearmed, created_at, updated_at, enqueued_at) "
                "SELECT id, tenant_id, 'threshold', 'done', 0, 1, false, now(), now(), "
                "now() - interval '1 hour' FROM conversations"
            )
        )
    db.dispose()


def _owe(url: str, owing: str) -> None:
    """Make exactly the rows matching ``owing`` pending, then refresh statistics."""
    db = Database(Settings(database_url=url))
    with db.transaction() as s:
        s.execute(text("UPDATE compaction_debt SET status = 'done' WHERE status = 'pending'"))
        s.execute(text(f"UPDATE compaction_debt SET status = 'pending' WHERE {owing}"))
        # As ``record_debt`` leaves them: the tenants that owe are flagged.
        s.execute(
            text(
                "UPDATE tenants SET compaction_due = EXISTS (SELECT 1 FROM compaction_debt d "
                "WHERE d.tenant_id = tenants.id AND d.status = 'pending')"
            )
        )
    with db.engine.connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql(
            "VACUUM ANALYZE compaction_debt, tenants"
        )
    db.dispose()


def _median(url: str, page_cost: str, repeat: int, work: Callable[[Database], None]) -> float:
    """``work``'s median time on a fresh pool whose connections plan with ``page_cost``.

    A fresh pool: a plan psycopg prepared on a connection would outlive a
    ``SET`` made afterwards.
    """
    db = Database(Settings(database_url=url))

    def configure(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.execute(f"SET random_page_cost = {page_cost}")
        dbapi_connection.commit()

    event.listen(db.engine, "connect", configure)
    times = []
    for _ in range(repeat + 1):  # the first run warms the pool and the caches
        started = time.perf_counter()
        work(db)
        times.append((time.perf_counter() - started) * 1000)
    db.dispose()
    return statistics.median(times[1:])


def _choose(db: Database) -> None:
    with db.session() as s:
        assert FairQueueRepository(s).due_tenants(utcnow(), 1)


def _durable_update(db: Database) -> None:
    with db.transaction() as s:
        s.execute(text("UPDATE tenants SET compaction_claimed_at = now() WHERE id = 't5'"))

"""``python -m bench growth --plans``: the plans are those of the queries grep really runs."""

from __future__ import annotations

from bench.growth import LIMITS, QUERIES
from bench.growth_plans import grep_plans
from bench.growth_seed import Seeder
from lcm.db.engine import Database
from lcm.retrieval.search_rows import Bounds
from tests.conftest import new_tenant


def test_each_grep_mode_reports_its_executed_plan_over_messages(pg_db: Database) -> None:
    tenant = new_tenant(pg_db).tenant_id
    with pg_db.engine.connect() as conn:
        (cid,) = Seeder(conn, tenant).raw(["planned"], 1_000)
        conn.commit()
    bounds = Bounds(tenant, (cid,))
    full_text = grep_plans(pg_db, bounds, QUERIES["grep full_text"], LIMITS)
    regex = grep_plans(pg_db, bounds, QUERIES["grep regex"], LIMITS)
    # One plan each (the warm-up run's are dropped), with the executed row counts.
    assert len(full_text) == 1
    assert len(regex) == 1
    assert "ts_rank_cd" in full_text[0]
    assert "~~*" in regex[0]  # the trigram prefilter (ILIKE) of regex mode
    assert all("actual time=" in plan for plan in full_text + regex)

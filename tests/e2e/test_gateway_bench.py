"""A short run of ``python -m bench gateway``: the scaled deployment under a gateway's load.

Real processes throughout (``lcm api``, a Celery worker, beat, Postgres,
Redis); only the model is the fake server, answering after a lognormal
delay. Asserts what the benchmark promises besides its timings: no errors,
compaction really ran during the load, and the audit read every conversation
and found each message stored once and reachable once.
"""

from __future__ import annotations

from pathlib import Path

from bench.deployment import Servers, Shape
from bench.gateway import measure
from bench.gateway_ab import HERE, compare
from bench.gateway_embedded import run_reference_sqlite, run_serve
from bench.workload import Load, ModelLikeLLM, synthetic_steps
from tests.servers import PostgresHandle, RedisHandle


def test_short_gateway_run_is_error_free_and_lossless(
    pg_server: PostgresHandle, redis_server: RedisHandle, tmp_path: Path
) -> None:
    srv = Servers(pg_server.admin_url, redis_server.url, tmp_path)
    # A small budget: the synthetic turns pass its threshold within seconds.
    load = Load(tenants=2, conversations=2, seconds=10, token_budget=4_000)
    [outcome] = measure(srv, [Shape(1, 1)], load, synthetic_steps(), reference=False)
    assert dict(outcome.drive.errors) == {}
    assert outcome.failed_debt == 0
    assert outcome.drive.turns > 0
    assert outcome.llm_calls > 0, "no compaction pass reached the model during the load"
    assert outcome.conversations_audited == 4
    assert outcome.audit == []


def test_side_by_side_run_serves_both_trees(
    pg_server: PostgresHandle, redis_server: RedisHandle, tmp_path: Path
) -> None:
    """``bench gateway_ab`` against this same tree: each side migrates, creates its
    tenants and serves from its own processes, under one load at the same time."""
    srv = Servers(pg_server.admin_url, redis_server.url, tmp_path)
    load = Load(tenants=1, conversations=2, seconds=4, token_budget=4_000)
    results = compare(srv, HERE, load, synthetic_steps())
    assert [r.label for r in results] == ["this tree", "against"]
    for result in results:
        assert result.errors == 0
        assert result.turns_per_second > 0
        assert result.api_ms_per_turn > 0  # the CPU meter read each side's own API process


def test_embedded_run_is_error_free_and_lossless_and_so_is_its_reference(tmp_path: Path) -> None:
    """``bench gateway --embedded``: ``lcm serve`` on SQLite serves the load and loses
    nothing (the audit reads the SQLite file while it runs); the SQLite reference
    serves the same turns."""
    load = Load(tenants=1, conversations=2, seconds=8, token_budget=4_000)
    steps = synthetic_steps()
    with ModelLikeLLM() as llm:
        outcome = run_serve(tmp_path, load, steps, llm)
    assert dict(outcome.drive.errors) == {}
    assert outcome.failed_debt == 0
    assert outcome.drive.turns > 0
    assert outcome.conversations_audited == 2
    assert outcome.audit == []
    assert outcome.stored_messages == sum(outcome.drive.sent.values())
    assert set(outcome.cores) == {"serve", "load"}
    assert outcome.cores["serve"] > 0  # the meter read the serve process itself
    reference = run_reference_sqlite(
        tmp_path, Load(tenants=1, conversations=2, seconds=3), steps, "t"
    )
    assert dict(reference.drive.errors) == {}
    assert reference.drive.turns > 0

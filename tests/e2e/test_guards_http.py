"""Bounds and guards, and overflow recovery, over HTTP.

``summary_max_overage_factor``, ``sweep_max_passes``, the per-conversation
summarization call rate limit, ``max_assembly_token_budget``, the host's live
``current_token_count`` and ``overflow: true`` on a turn. Inline mode runs
the production chain in the request; deferred mode leaves a wake-up in the
outbox (recorded by the test's sender).
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from lcm.db.engine import Database
from lcm.db.models import CompactionDebt, CompactionRun, Summary, utcnow
from lcm.tenants.service import IssuedKey
from tests.conftest import RecordingSender, auth
from tests.fakes import FakeAnthropicServer
from tests.fakes.anthropic_script import Behaviour
from tests.integration.test_compaction_engine import assert_lossless

KEY = "agent:main:guards"
SMALL: dict[str, Any] = {
    "compaction_mode": "inline",
    "fresh_tail_count": 6,
    "leaf_min_fanout": 4,
    "leaf_chunk_tokens": 600,
    "condensed_min_fanout": 3,
}


def configure(client: TestClient, tenant: IssuedKey, **changes: Any) -> None:
    r = client.patch("/v1/tenant/settings", json=changes, headers=auth(tenant))
    assert r.status_code == 200, r.text


def messages(start: int, n: int) -> list[dict[str, str]]:
    return [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"step {i}: we moved the deploy checks to the nightly job, then "
            "verified the database migration and the backup restore " * 2,
        }
        for i in range(start, start + n)
    ]


def turn(client: TestClient, tenant: IssuedKey, batch: list[dict[str, str]], **extra: Any) -> Any:
    body = {"messages": batch, "token_budget": 2_000, **extra}
    r = client.post(f"/v1/conversations/{KEY}/turns", json=body, headers=auth(tenant))
    assert r.status_code == 200, r.text
    return r.json()


def runs(db: Database) -> int:
    with db.session() as s:
        return int(s.scalar(select(func.count()).select_from(CompactionRun)) or 0)


def test_a_summary_far_over_its_target_escalates(
    db: Database, tenant: IssuedKey, llm: FakeAnthropicServer, llm_client: TestClient
) -> None:
    configure(llm_client, tenant, **SMALL, summary_model="claude-test", leaf_target_tokens=64)
    # ~250 tokens: smaller than the ~500-token chunk, over 3 x the 64-token target.
    llm.script([Behaviour.reply("The team reviewed the deploy and backup work. " * 22)])
    turn(llm_client, tenant, messages(0, 30))
    with db.session() as s:
        first = s.scalars(select(Summary).order_by(Summary.created_at, Summary.id)).first()
        assert first is not None
        assert first.escalation == "aggressive"  # not the oversized normal reply
        assert first.token_count <= 3 * 64
    assert len(llm.requests) >= 2


def test_sweep_max_passes_stops_the_chain(
    db: Database, tenant: IssuedKey, client: TestClient
) -> None:
    configure(client, tenant, **SMALL, sweep_max_passes=2)
    result = turn(client, tenant, messages(0, 80))
    assert result["compaction"] == "ran"
    assert runs(db) == 2  # without the bound the chain runs every eligible pass
    with db.session() as s:
        debt = s.scalar(select(CompactionDebt))
        assert debt is not None
        assert debt.status == "done"  # stopped cleanly: the next turn's debt resumes it
    assert_lossless(db, result["conversation_id"])
    turn(client, tenant, messages(80, 2))
    assert runs(db) == 4


def test_the_call_rate_limit_pauses_the_chain_with_a_delayed_wake_up(
    db: Database, tenant: IssuedKey, client: TestClient
) -> None:
    configure(client, tenant, **SMALL, summary_max_calls_per_window=3)
    before = utcnow()
    turn(client, tenant, messages(0, 80))
    assert runs(db) == 3
    with db.session() as s:
        debt = s.scalar(select(CompactionDebt))
        assert debt is not None
        assert debt.status == "pending"  # the lease is given back, no attempt spent
        assert debt.attempts == 0
        assert debt.enqueued_at is not None
        # Not before the oldest call leaves the 600 s window.
        assert debt.enqueued_at > before + timedelta(seconds=590)
    turn(client, tenant, messages(80, 2))
    assert runs(db) == 3  # still within the window: no more calls


def newest_run(db: Database) -> datetime:
    with db.session() as s:
        newest = s.scalar(select(func.max(CompactionRun.created_at)))
    assert newest is not None
    return newest


def test_an_open_call_guard_backs_off_before_the_next_pass(
    db: Database, tenant: IssuedKey, client: TestClient
) -> None:
    window, backoff = 1.0, 2.5
    configure(
        client,
        tenant,
        **SMALL,
        summary_max_calls_per_window=2,
        summary_call_window_seconds=window,
        summary_spend_backoff_seconds=backoff,
    )
    turn(client, tenant, messages(0, 80))
    assert runs(db) == 2  # the guard opened
    opened = newest_run(db)
    with db.session() as s:
        debt = s.scalar(select(CompactionDebt))
        assert debt is not None
        assert debt.status == "pending"
        # The delayed wake-up is due when the backoff ends, not when the window frees.
        assert debt.enqueued_at is not None
        assert debt.enqueued_at >= opened + timedelta(seconds=backoff - 0.05)
    # The window has room again, but the backoff holds: a turn runs no pass.
    time.sleep(max(0.0, (opened + timedelta(seconds=window + 0.1) - utcnow()).total_seconds()))
    turn(client, tenant, messages(80, 2))
    assert runs(db) == 2
    # Once the backoff has elapsed, the next turn's chain runs passes again.
    time.sleep(max(0.0, (opened + timedelta(seconds=backoff + 0.1) - utcnow()).total_seconds()))
    turn(client, tenant, messages(82, 2))
    assert runs(db) > 2


def test_max_assembly_token_budget_caps_every_budget(
    db: Database, tenant: IssuedKey, client: TestClient
) -> None:
    configure(client, tenant, max_assembly_token_budget=1_000, fresh_tail_count=6)
    result = turn(client, tenant, messages(0, 30), token_budget=100_000)
    assert result["token_budget"] == 1_000
    assert result["threshold_tokens"] == 750
    assert result["compaction"] == "scheduled"  # ~2,000 stored tokens: over the capped threshold
    r = client.post(
        f"/v1/conversations/{KEY}/assemble", json={"token_budget": 100_000}, headers=auth(tenant)
    )
    assert r.status_code == 200, r.text
    assert r.json()["token_budget"] == 1_000
    assert r.json()["estimated_tokens"] <= 1_000


def test_current_token_count_is_what_the_threshold_sees(
    db: Database, tenant: IssuedKey, client: TestClient, sender: RecordingSender
) -> None:
    quiet = turn(client, tenant, messages(0, 2))
    assert quiet["compaction"] == "none"
    # The same small context, but the host's prompt (system prompt, tools) is near the window.
    live = turn(client, tenant, messages(2, 2), current_token_count=1_900)
    assert live["context_tokens"] == 1_900
    assert live["compaction"] == "scheduled"
    assert sender.woken == [live["conversation_id"]]


def test_overflow_records_overflow_debt_with_a_target_under_the_budget(
    db: Database, tenant: IssuedKey, client: TestClient, sender: RecordingSender
) -> None:
    r = client.post(
        f"/v1/conversations/{KEY}/messages", json={"messages": messages(0, 6)}, headers=auth(tenant)
    )
    assert r.status_code == 200, r.text
    result = turn(client, tenant, [], overflow=True, current_token_count=2_100)
    stored = result["context_tokens"]
    assert stored == 2_100
    assert result["compaction"] == "scheduled"
    with db.session() as s:
        debt = s.scalar(select(CompactionDebt))
        assert debt is not None
        assert debt.reason == "overflow"
        stored_tokens = s.scalar(select(func.sum(Summary.token_count)))  # none yet
        assert stored_tokens is None
        assert debt.target_tokens == result["target_tokens"]
    # The target leaves room for the host's overhead (live count beyond the stored context).
    assert result["target_tokens"] < result["threshold_tokens"] < 2_000
    assert sender.woken == [result["conversation_id"]]


def test_overflow_in_inline_mode_compacts_under_the_target_before_answering(
    db: Database, tenant: IssuedKey, client: TestClient
) -> None:
    configure(client, tenant, **SMALL)
    r = client.post(
        f"/v1/conversations/{KEY}/messages",
        json={"messages": messages(0, 60)},
        headers=auth(tenant),
    )
    assert r.status_code == 200, r.text
    result = turn(client, tenant, [], overflow=True, current_token_count=4_500, token_budget=4_000)
    assert result["compaction"] == "ran"
    assert result["target_tokens"] is not None
    assert result["context_tokens_after"] <= result["target_tokens"]
    assert_lossless(db, result["conversation_id"])

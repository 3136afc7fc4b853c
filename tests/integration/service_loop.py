"""What the service-loop tests share.

A clock the test moves, a summarizer with a hook that runs mid-call, a job
runner on them, a turn over HTTP, and the worker played by hand (``drain``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient

from lcm.compaction.debt_repository import DebtRepository
from lcm.compaction.engine import CompactionEngine
from lcm.compaction.jobs import CompactionJobs
from lcm.compaction.steps import Step
from lcm.db.engine import Database
from lcm.db.models import CompactionDebt, utcnow
from lcm.summarize.extractive import ExtractiveProvider
from lcm.summarize.summarizer import Summarizer, SummaryResult
from lcm.tenants.service import IssuedKey
from tests.conftest import auth

BUDGET = 2_000
SMALL = {"fresh_tail_count": 4, "leaf_min_fanout": 4, "leaf_chunk_tokens": 400}


class Clock:
    def __init__(self) -> None:
        self.now = utcnow()

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class HookedSummarizer(Summarizer):
    """The offline summarizer, with a hook that runs mid-"LLM call"."""

    def __init__(self, hook: Callable[[], None] | None = None, fail: bool = False) -> None:
        super().__init__(ExtractiveProvider())
        self.hook, self.fail = hook, fail

    def summarize(self, source_text: str, **kwargs: Any) -> SummaryResult:
        if self.hook is not None:
            hook, self.hook = self.hook, None
            hook()
        if self.fail:
            raise RuntimeError("summarizer exploded")
        return super().summarize(source_text, **kwargs)


def jobs_for(
    db: Database, clock: Clock, owner: str, summarizer: Summarizer | None = None, **overrides: Any
) -> CompactionJobs:
    settings = db.settings.model_copy(update={**SMALL, "lease_seconds": 60, **overrides})
    engine = CompactionEngine(
        db.transaction, summarizer or HookedSummarizer(), reads=db.lookup_session
    )
    return CompactionJobs(db.transaction, engine, settings, owner, clock=clock)


def turn(
    client: TestClient,
    tenant: IssuedKey,
    n: int,
    key: str = "k",
    start: int = 0,
    budget: int = BUDGET,
) -> dict[str, Any]:
    messages = [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "id": f"{key}-{i}",
            "content": f"message {i} about the deploy of service {i % 7} " * 8,
        }
        for i in range(start, start + n)
    ]
    r = client.post(
        f"/v1/conversations/{key}/turns",
        headers=auth(tenant),
        json={"messages": messages, "token_budget": budget},
    )
    assert r.status_code == 200, r.text
    return r.json()


def drain(jobs: CompactionJobs, conversation_id: int, limit: int = 200) -> list[Step]:
    """Play the worker: the first job (claims), then the chain of passes to the end."""
    steps = [jobs.wake(conversation_id)]
    while steps[-1].action == "pass" and len(steps) < limit:
        token = steps[-1].fencing_token
        assert token is not None
        steps.append(jobs.run_pass(conversation_id, token, position=steps[-1].position))
    return steps


def debt_of(db: Database, conversation_id: int) -> CompactionDebt:
    with db.session() as s:
        debt = DebtRepository(s).get(conversation_id)
    assert debt is not None
    return debt

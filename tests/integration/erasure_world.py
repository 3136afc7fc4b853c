"""A small world of tenants and conversations to erase, and a row-level census of it.

Each conversation gets messages over HTTP (one with a large file), real
compaction (the offline summarizer: leaf and condensed summaries), an
expansion grant and an LLM usage row. :func:`census` reads every row of
every table in the models' metadata, so a table added later is covered
without a change here.
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from lcm.compaction.engine import CompactionEngine
from lcm.compaction.inline import run_inline
from lcm.compaction.jobs import CompactionJobs
from lcm.compaction.service import owe_compaction
from lcm.db.engine import Database
from lcm.db.models import Base, HostUsage, LlmUsage, Message, Summary, utcnow
from lcm.retrieval.grants import issue_grant
from lcm.settings import Settings
from lcm.summarize.extractive import ExtractiveProvider
from lcm.summarize.provider import Completion, SummaryProvider, SummaryRequest
from lcm.summarize.summarizer import Summarizer
from tests.conftest import RecordingSender

WORDS = [
    "deploy",
    "build",
    "test",
    "config",
    "server",
    "client",
    "database",
    "migration",
    "error",
    "fix",
    "decided",
]
SHARED_FILE = "shared line of a pasted log file\n" * 4_000  # ~130 KB: over the threshold
COMPACTION = {
    "fresh_tail_count": 16,
    "leaf_chunk_tokens": 2_000,
    "leaf_min_fanout": 8,
    "condensed_min_fanout": 3,
    "summary_prefix_target_tokens": 300,
}


@pytest.fixture
def files_dir(tmp_path: Path) -> Path:
    return tmp_path / "files"


@pytest.fixture
def world_settings(db: Database, files_dir: Path) -> Settings:
    return db.settings.model_copy(update={"files_dir": files_dir, **COMPACTION})


@pytest.fixture
def api(db: Database, world_settings: Settings, sender: RecordingSender) -> Iterator[TestClient]:
    from api.app import create_app
    from workers.link import CeleryLink

    app = create_app(
        world_settings, link=CeleryLink(), database=db, broker_ping=lambda: True, sender=sender
    )
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def messages(n: int, *, seed: int, marker: str, start: int = 0) -> list[dict[str, object]]:
    rng = random.Random(seed)
    out: list[dict[str, object]] = []
    for i in range(start, start + n):
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(30, 80)))
        role = "user" if i % 2 == 0 else "assistant"
        out.append({"role": role, "content": f"{marker} {i}: {words}", "id": f"{marker}-{i}"})
    return out


def with_file(body: str, name: str, i: int, marker: str) -> dict[str, object]:
    return {
        "role": "user",
        "content": [{"type": "text", "text": f'{marker} file <file name="{name}">{body}</file>'}],
        "id": f"{marker}-file-{i}",
    }


def post(client: TestClient, key: str, api_key: str, batch: list[dict[str, object]]) -> int:
    r = client.post(
        f"/v1/conversations/{key}/messages",
        headers={"Authorization": f"Bearer {api_key}"},
        json={"messages": batch},
    )
    assert r.status_code == 200, r.text
    return int(r.json()["conversation_id"])


def jobs(
    db: Database, settings: Settings, provider: SummaryProvider | None = None
) -> CompactionJobs:
    summarizer = Summarizer(provider or ExtractiveProvider())
    return CompactionJobs(
        db.transaction, CompactionEngine(db.transaction, summarizer), settings, owner="test"
    )


def compact(db: Database, settings: Settings, tenant_id: str, conversation_id: int) -> None:
    with db.transaction() as session:
        owe_compaction(session, tenant_id, conversation_id, "manual", 4_000, 1_000, mode="inline")
    assert run_inline(jobs(db, settings), conversation_id)


def build_conversation(
    db: Database,
    client: TestClient,
    settings: Settings,
    tenant_id: str,
    api_key: str,
    key: str,
    marker: str,
    *,
    unique_file: bool = True,
) -> int:
    """Messages (two large files: one shared, one unique), summaries, a grant, usage."""
    cid = post(client, key, api_key, messages(60, seed=len(marker), marker=marker))
    post(client, key, api_key, [with_file(SHARED_FILE, "shared.log", 0, marker)])
    if unique_file:
        unique = f"{marker} only line\n" * 9_000
        post(client, key, api_key, [with_file(unique, f"{marker}.log", 1, marker)])
    post(client, key, api_key, messages(100, seed=len(marker) + 1, marker=marker, start=60))
    compact(db, settings, tenant_id, cid)
    now = utcnow()
    with db.transaction() as session:
        issue_grant(session, tenant_id, [cid], 10_000, 600, now)
        session.add(
            LlmUsage(
                tenant_id=tenant_id,
                conversation_id=cid,
                model="m",
                purpose="summary",
                input_tokens=7,
                output_tokens=3,
            )
        )
        session.add(
            HostUsage(
                tenant_id=tenant_id,
                conversation_id=cid,
                model="m",
                input_tokens=90,
                output_tokens=9,
                cache_read_tokens=900,
                cache_write_tokens=40,
            )
        )
    with db.read_session() as session:
        depths = set(session.scalars(select(Summary.depth).where(Summary.conversation_id == cid)))
    assert {0, 1} <= depths, f"compaction made no condensed summary: {depths}"
    return cid


class BlockingProvider:
    """The offline summarizer, held inside the call until released (an LLM call in flight)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def complete(self, request: SummaryRequest) -> Completion:
        self.entered.set()
        assert self.release.wait(30), "the test never released the summarizer"
        return ExtractiveProvider().complete(request)


# --- the census --------------------------------------------------------------

Row = dict[str, object]


def census(db: Database) -> dict[str, list[Row]]:
    """Every row of every model table, as plain dicts."""
    with db.read_session() as session:
        return {
            table.name: [dict(r._mapping) for r in session.execute(select(table))]
            for table in Base.metadata.sorted_tables
        }


def frozen(row: Row, drop: frozenset[str] = frozenset()) -> str:
    return json.dumps({k: v for k, v in row.items() if k not in drop}, sort_keys=True, default=str)


@dataclass(frozen=True)
class Owned:
    """The ids that make a row belong to the erased conversations."""

    conversation_ids: frozenset[int]
    message_ids: frozenset[int]
    summary_ids: frozenset[str]

    @classmethod
    def of(cls, db: Database, conversation_ids: set[int]) -> Owned:
        with db.read_session() as session:
            messages = session.scalars(
                select(Message.id).where(Message.conversation_id.in_(conversation_ids))
            )
            summaries = session.scalars(
                select(Summary.id).where(Summary.conversation_id.in_(conversation_ids))
            )
            return cls(frozenset(conversation_ids), frozenset(messages), frozenset(summaries))

    def refers(self, table: str, row: Row) -> bool:
        """Does ``row`` belong to, or point at, the erased conversations?"""
        conversations = self.conversation_ids
        for column in ("conversation_id", "parent_conversation_id", "child_conversation_id"):
            if row.get(column) in conversations:
                return True
        if table == "conversations" and row["id"] in conversations:
            return True
        if row.get("message_id") in self.message_ids:
            return True
        if table == "messages" and row["id"] in self.message_ids:
            return True
        if row.get("summary_id") in self.summary_ids or row.get("parent_id") in self.summary_ids:
            return True
        if table == "summaries" and row["id"] in self.summary_ids:
            return True
        scope = row.get("conversation_ids")
        return isinstance(scope, list) and bool(conversations.intersection(scope))


# Usage rows stay as billing history; only their conversation link is cleared.
# The tenant row stays; its quota counters drop by what was erased.
KEPT_UNLINKED = {
    "host_usage": frozenset({"conversation_id"}),
    "llm_usage": frozenset({"conversation_id"}),
    "tenants": frozenset({"stored_messages", "stored_file_bytes"}),
}


def assert_only_erased(
    before: dict[str, list[Row]], after: dict[str, list[Row]], owned: Owned
) -> dict[str, int]:
    """Nothing left that refers to ``owned``, nothing else changed; rows removed per table."""
    removed_counts: dict[str, int] = {}
    for table, rows in before.items():
        drop = KEPT_UNLINKED.get(table, frozenset())
        left = after[table]
        lingering = [r for r in left if owned.refers(table, r)]
        assert not lingering, f"{table}: {len(lingering)} row(s) of the erased data remain"
        if drop:
            assert sorted(frozen(r, drop) for r in rows) == sorted(frozen(r, drop) for r in left)
            continue
        after_set = {frozen(r) for r in left}
        gone = [r for r in rows if frozen(r) not in after_set]
        assert all(owned.refers(table, r) for r in gone), f"{table}: an unrelated row went"
        assert after_set <= {frozen(r) for r in rows}, f"{table}: a row changed or appeared"
        removed_counts[table] = len(gone)
    return removed_counts


def wait_for(condition: threading.Event, what: str) -> None:
    assert condition.wait(30), f"timed out waiting for {what}"


def hour_ago() -> timedelta:
    return timedelta(hours=1)

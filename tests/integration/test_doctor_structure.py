"""The doctor sees structural breakage made directly in the database, and apply repairs it.

Each kind: context items pointing nowhere, counters behind stored rows,
stored token counts that differ from the recomputed ones, and a summary
without sources (reported, not repairable).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import delete, select

from lcm.db.engine import Database
from lcm.db.models import ContextItem, Conversation, Message, Summary, SummaryMessage
from lcm.retrieval.describe import source_range
from lcm.retrieval.repository import HistoryRepository
from lcm.settings import Settings
from lcm.tenants.service import IssuedKey
from tests.conftest import auth
from tests.integration.erasure_world import (
    COMPACTION,
    api,  # noqa: F401  (fixture)
    compact,
    files_dir,  # noqa: F401  (fixture)
    messages,
    post,
)
from tests.servers import run_lcm

KEY = "doc"


@pytest.fixture
def world_settings(db: Database, files_dir: Path) -> Settings:  # noqa: F811
    return db.settings.model_copy(update={"files_dir": files_dir, **COMPACTION})


@pytest.fixture
def cid(
    db: Database,
    tenant: IssuedKey,
    api: TestClient,  # noqa: F811
    world_settings: Settings,
) -> int:
    """A compacted conversation the doctor finds healthy."""
    conversation_id = post(api, KEY, tenant.api_key, messages(60, seed=3, marker="dr"))
    compact(db, world_settings, tenant.tenant_id, conversation_id)
    report = doctor(api, tenant)
    assert report["conversations"] == [], report
    return conversation_id


def doctor(api: TestClient, tenant: IssuedKey) -> dict[str, Any]:  # noqa: F811
    r = api.get("/v1/tenant/doctor", headers=auth(tenant))
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def apply(api: TestClient, tenant: IssuedKey) -> dict[str, Any]:  # noqa: F811
    r = api.post("/v1/tenant/doctor/apply", headers=auth(tenant), json={})
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def assemble(api: TestClient, tenant: IssuedKey) -> int:  # noqa: F811
    r = api.post(
        f"/v1/conversations/{KEY}/assemble", headers=auth(tenant), json={"token_budget": 3_000}
    )
    return r.status_code


def items(db: Database, conversation_id: int) -> list[ContextItem]:
    with db.read_session() as s:
        return list(
            s.scalars(
                select(ContextItem)
                .where(ContextItem.conversation_id == conversation_id)
                .order_by(ContextItem.ordinal)
            )
        )


def test_dangling_context_items_are_reported_and_dropped(
    db: Database,
    tenant: IssuedKey,
    api: TestClient,  # noqa: F811
    cid: int,
) -> None:
    with db.transaction() as s:
        conversation = s.get(Conversation, cid)
        assert conversation is not None
        base = conversation.last_ordinal
        conversation.last_ordinal = base + 2
        s.add(
            ContextItem(
                tenant_id=tenant.tenant_id,
                conversation_id=cid,
                ordinal=base + 1,
                item_type="message",
                token_count=1,
            )
        )
        s.add(
            ContextItem(
                tenant_id=tenant.tenant_id,
                conversation_id=cid,
                ordinal=base + 2,
                item_type="summary",
                token_count=1,
            )
        )
    assert assemble(api, tenant) == 500  # what the breakage does
    report = doctor(api, tenant)
    (entry,) = report["conversations"]
    assert entry["dangling_items"] == [base + 1, base + 2]
    assert report["dangling_items"] == 2
    assert (entry["broken"], entry["counters_behind"], entry["miscounted"]) == ([], [], [])

    done = apply(api, tenant)
    assert done["status"] == "none"
    assert done["repaired"] == [
        {
            "conversation_id": cid,
            "dropped_items": [base + 1, base + 2],
            "counters_raised": [],
            "recounted": 0,
            "unrepairable": [],
        }
    ]
    assert doctor(api, tenant)["conversations"] == []
    assert assemble(api, tenant) == 200
    assert all(i.ordinal <= base for i in items(db, cid))


def test_counters_behind_stored_rows_are_raised(
    db: Database,
    tenant: IssuedKey,
    api: TestClient,  # noqa: F811
    cid: int,
) -> None:
    with db.transaction() as s:
        conversation = s.get(Conversation, cid)
        assert conversation is not None
        seq, ordinal = conversation.last_seq, conversation.last_ordinal
        conversation.last_seq, conversation.last_ordinal = seq - 3, ordinal - 3
    more = messages(2, seed=9, marker="dr", start=60)
    r = api.post(f"/v1/conversations/{KEY}/messages", headers=auth(tenant), json={"messages": more})
    assert r.status_code >= 400  # the next ingest collides with a stored row
    (entry,) = doctor(api, tenant)["conversations"]
    assert entry["counters_behind"] == ["last_seq", "last_ordinal"]

    (repair,) = apply(api, tenant)["repaired"]
    assert repair["counters_raised"] == ["last_seq", "last_ordinal"]
    with db.read_session() as s:
        conversation = s.get(Conversation, cid)
        assert conversation is not None
        assert (conversation.last_seq, conversation.last_ordinal) == (seq, ordinal)
    assert post(api, KEY, tenant.api_key, more) == cid
    assert doctor(api, tenant)["conversations"] == []
    assert assemble(api, tenant) == 200


def test_token_counts_that_differ_from_the_recomputed_ones_are_recounted(
    db: Database,
    tenant: IssuedKey,
    api: TestClient,  # noqa: F811
    cid: int,
) -> None:
    before = [(i.ordinal, i.token_count) for i in items(db, cid)]
    shown = items(db, cid)
    message_item = next(i for i in shown if i.message_id is not None)
    summary_item = next(i for i in shown if i.summary_id is not None)
    with db.transaction() as s:
        message = s.get(Message, message_item.message_id)
        summary = s.get(Summary, summary_item.summary_id)
        assert message is not None
        assert summary is not None
        seq, sid = message.seq, summary.id
        message.token_count = 10**6
        summary.token_count = 1
        for item in s.scalars(select(ContextItem).where(ContextItem.conversation_id == cid)):
            item.token_count = 1
    (entry,) = doctor(api, tenant)["conversations"]
    assert f"message:{seq}" in entry["miscounted"]
    assert f"summary:{sid}" in entry["miscounted"]
    assert {f"context_item:{o}" for o, _ in before} <= set(entry["miscounted"])

    (repair,) = apply(api, tenant)["repaired"]
    assert repair["recounted"] == len(entry["miscounted"])
    assert [(i.ordinal, i.token_count) for i in items(db, cid)] == before
    assert doctor(api, tenant)["conversations"] == []
    assert assemble(api, tenant) == 200


def test_stored_source_ranges_that_differ_from_the_walk_are_recomputed(
    db: Database,
    tenant: IssuedKey,
    api: TestClient,  # noqa: F811
    cid: int,
) -> None:
    """A wrong range on a leaf (and so, by induction, on what is condensed from it)
    and a missing one (a server older than migration 0030) are found and repaired."""
    with db.transaction() as s:
        leaf = s.scalars(
            select(Summary).where(Summary.conversation_id == cid, Summary.kind == "leaf")
        ).first()
        condensed = s.scalars(
            select(Summary).where(Summary.conversation_id == cid, Summary.kind == "condensed")
        ).first()
        assert leaf is not None
        assert condensed is not None
        leaf_id, condensed_id = leaf.id, condensed.id
        leaf.source_message_count = 999
        leaf.source_last_seq = 10**6
        condensed.source_message_count = condensed.source_first_seq = None
    (entry,) = doctor(api, tenant)["conversations"]
    assert f"source_range:{leaf_id}" in entry["miscounted"]
    assert f"source_range:{condensed_id}" in entry["miscounted"]

    (repair,) = apply(api, tenant)["repaired"]
    assert repair["recounted"] == len(entry["miscounted"])
    assert doctor(api, tenant)["conversations"] == []
    with db.read_session() as s:
        repo = HistoryRepository(s)
        for summary in s.scalars(select(Summary).where(Summary.conversation_id == cid)):
            walked = source_range(repo, [summary.id])
            assert (
                summary.source_message_count,
                summary.source_first_seq,
                summary.source_last_seq,
            ) == (walked.message_count, walked.first_seq, walked.last_seq), summary.id


def test_a_summary_without_sources_is_reported_as_unrepairable(
    db: Database,
    tenant: IssuedKey,
    api: TestClient,  # noqa: F811
    cid: int,
) -> None:
    with db.transaction() as s:
        leaf = s.scalars(
            select(Summary).where(Summary.conversation_id == cid, Summary.kind == "leaf")
        ).first()
        assert leaf is not None
        sid = leaf.id
        s.execute(delete(SummaryMessage).where(SummaryMessage.summary_id == sid))
    (entry,) = doctor(api, tenant)["conversations"]
    assert entry["broken"] == [sid]
    (repair,) = apply(api, tenant)["repaired"]
    assert repair["unrepairable"] == [f"summary {sid} has no sources"]
    assert doctor(api, tenant)["conversations"][0]["broken"] == [sid]  # still there
    assert assemble(api, tenant) == 200


def test_the_cli_reports_and_repairs_the_same(
    db: Database,
    tenant: IssuedKey,
    api: TestClient,  # noqa: F811
    cid: int,
) -> None:
    with db.transaction() as s:
        conversation = s.get(Conversation, cid)
        assert conversation is not None
        conversation.last_ordinal -= 1
        for item in s.scalars(select(ContextItem).where(ContextItem.conversation_id == cid)):
            item.token_count += 1
    env = {"LCM_DATABASE_URL": db.settings.database_url}
    listed = run_lcm("doctor", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    ((entry,),) = [t["conversations"] for t in json.loads(listed.stdout)]
    assert entry["counters_behind"] == ["last_ordinal"]
    assert len(entry["miscounted"]) == len(items(db, cid))
    table = run_lcm("doctor", env={**env, "COLUMNS": "200"}).stdout
    assert "dangling items" in table
    assert "last_ordinal" in table

    done = run_lcm("doctor", "--apply", "--json", env=env)
    assert done.returncode == 0, done.stderr
    owed = json.loads(done.stdout.strip().splitlines()[-1])
    (repair,) = owed["structural"]
    assert (repair["conversation_id"], repair["counters_raised"]) == (cid, ["last_ordinal"])
    assert doctor(api, tenant)["conversations"] == []

"""``lcm doctor-clean``'s domain: junk found by key pattern and idleness, erased or archived."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import func, select, update

from lcm.db.engine import Database
from lcm.db.models import ContextItem, Conversation, Message, Summary, utcnow
from lcm.erasure.junk import JunkCriteria, clean_junk, find_junk
from lcm.files.storage import LocalFileStorage
from lcm.tenants.service import IssuedKey
from tests.conftest import auth, new_tenant

CRON_RUN = "agent:main:cron:nightly:run:1"
CRON = "agent:main:cron:hourly"
SUBAGENT = "agent:main:subagent:abc"
HEARTBEAT = "agent:main:heartbeat"
MAIN = "agent:main:main"
TEAM = "team/one"


def write(client: TestClient, tenant: IssuedKey, key: str, messages: int = 1) -> int:
    body = {"messages": [{"role": "user", "content": f"{key} {i}"} for i in range(messages)]}
    r = client.post(f"/v1/conversations/{key}/messages", headers=auth(tenant), json=body)
    assert r.status_code == 200, r.text
    return int(r.json()["conversation_id"])


def age(db: Database, conversation_id: int, days: float) -> None:
    with db.transaction() as session:
        session.execute(
            update(Conversation)
            .where(Conversation.id == conversation_id)
            .values(updated_at=utcnow() - timedelta(days=days))
        )


def world(db: Database, client: TestClient, tenant: IssuedKey) -> dict[str, int]:
    """Six conversations; all but the fresh cron one and the team one idle for 40 days."""
    ids = {key: write(client, tenant, key, messages=2) for key in (CRON, TEAM)}
    for key in (CRON_RUN, SUBAGENT, HEARTBEAT, MAIN):
        ids[key] = write(client, tenant, key, messages=3)
        age(db, ids[key], 40)
    return ids


def state(db: Database) -> tuple[list[int], int, list[int]]:
    """(conversation ids, messages, archived conversation ids)."""
    with db.read_session() as session:
        conversations = sorted(session.scalars(select(Conversation.id)))
        messages = session.scalar(select(func.count()).select_from(Message)) or 0
        archived = sorted(
            session.scalars(select(Conversation.id).where(Conversation.archived_at.is_not(None)))
        )
    return conversations, messages, archived


def found(db: Database, tenant: IssuedKey, criteria: JunkCriteria) -> dict[int, list[str]]:
    with db.read_session() as session:
        junk = find_junk(session, [(tenant.tenant_id, "acme")], criteria, utcnow())
    return {j.conversation_id: j.reasons for j in junk}


def test_patterns_and_inactivity_select_the_junk(
    db: Database, client: TestClient, tenant: IssuedKey
) -> None:
    ids = world(db, client, tenant)
    other = new_tenant(db, "other")
    write(client, other, CRON)  # another tenant's: never listed for acme
    before = state(db)

    by_default = found(db, tenant, JunkCriteria())
    assert set(by_default) == {ids[k] for k in (CRON_RUN, CRON, SUBAGENT, HEARTBEAT)}
    assert by_default[ids[SUBAGENT]] == ["key matches agent:*:subagent:**"]

    idle = found(db, tenant, JunkCriteria(inactive_days=30))
    assert set(idle) == {ids[k] for k in (CRON_RUN, SUBAGENT, HEARTBEAT)}
    assert idle[ids[HEARTBEAT]] == ["key matches agent:*:heartbeat*", "inactive 40 days"]

    any_idle = found(db, tenant, JunkCriteria(patterns=("**",), inactive_days=30))
    assert set(any_idle) == {ids[k] for k in (CRON_RUN, SUBAGENT, HEARTBEAT, MAIN)}
    assert found(db, tenant, JunkCriteria(patterns=("team/*",))) == {
        ids[TEAM]: ["key matches team/*"]
    }
    assert found(db, tenant, JunkCriteria(inactive_days=60)) == {}
    assert state(db) == before  # listing changes nothing


def test_apply_erases_exactly_the_listed_and_reports_a_refusal(
    db: Database, client: TestClient, tenant: IssuedKey, tmp_path: Path
) -> None:
    ids = world(db, client, tenant)
    parent, child = write(client, tenant, "subagent:p"), write(client, tenant, "subagent:q")
    with db.transaction() as session:
        # The team conversation (not junk) starts from the idle cron run's
        # summary: erasing the run is refused. The child subagent starts
        # from its parent's: both are junk, and the child goes first.
        for source, user in ((ids[CRON_RUN], ids[TEAM]), (parent, child)):
            summary_id = f"sum_{source:016x}"
            now = utcnow()
            session.add(
                Summary(
                    id=summary_id,
                    tenant_id=tenant.tenant_id,
                    conversation_id=source,
                    kind="leaf",
                    depth=0,
                    content="s",
                    token_count=1,
                    earliest_at=now,
                    latest_at=now,
                    descendant_count=0,
                    escalation="normal",
                    model="m",
                )
            )
            session.flush()
            session.add(
                ContextItem(
                    tenant_id=tenant.tenant_id,
                    conversation_id=user,
                    ordinal=1_000,
                    item_type="summary",
                    summary_id=summary_id,
                    token_count=1,
                )
            )
    criteria = JunkCriteria(inactive_days=30)
    for cid in (parent, child):
        age(db, cid, 35)
    with db.read_session() as session:
        junk = find_junk(session, [(tenant.tenant_id, "acme")], criteria, utcnow())
    listed = {j.conversation_id for j in junk}
    assert listed == {ids[CRON_RUN], ids[SUBAGENT], ids[HEARTBEAT], parent, child}

    storage = LocalFileStorage(tmp_path / "files")
    outcomes = clean_junk(db.transaction, db.read_session, storage, junk, criteria, utcnow())
    statuses = {o.conversation_id: o.status for o in outcomes}
    assert statuses == {
        ids[CRON_RUN]: "refused",
        ids[SUBAGENT]: "erased",
        ids[HEARTBEAT]: "erased",
        parent: "erased",
        child: "erased",
    }
    refused = next(o for o in outcomes if o.status == "refused")
    assert str(ids[TEAM]) in refused.detail
    remaining, messages, _ = state(db)
    assert remaining == sorted(ids[k] for k in (CRON, TEAM, CRON_RUN, MAIN))
    assert messages == 2 + 2 + 3 + 3


def test_archive_marks_and_a_fresh_message_keeps(
    db: Database, client: TestClient, tenant: IssuedKey, tmp_path: Path
) -> None:
    ids = world(db, client, tenant)
    criteria = JunkCriteria(inactive_days=30)
    with db.read_session() as session:
        junk = find_junk(session, [(tenant.tenant_id, "acme")], criteria, utcnow())
    write(client, tenant, SUBAGENT)  # active again since the listing
    before, messages, _ = state(db)

    storage = LocalFileStorage(tmp_path / "files")
    outcomes = clean_junk(
        db.transaction, db.read_session, storage, junk, criteria, utcnow(), archive=True
    )
    assert {o.conversation_id: o.status for o in outcomes} == {
        ids[CRON_RUN]: "archived",
        ids[HEARTBEAT]: "archived",
        ids[SUBAGENT]: "kept",
    }
    after, messages_after, archived = state(db)
    assert (after, messages_after) == (before, messages)  # archiving erases nothing
    assert archived == sorted([ids[CRON_RUN], ids[HEARTBEAT]])

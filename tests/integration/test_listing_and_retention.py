"""Listing a tenant's conversations, and retention erasing the idle ones."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import select, update

from lcm.db.engine import Database
from lcm.db.models import Conversation, Message, utcnow
from lcm.erasure.retention import sweep_retention
from lcm.files.storage import LocalFileStorage
from lcm.settings import Settings
from lcm.tenants.service import IssuedKey
from tests.conftest import auth, new_tenant
from tests.integration.erasure_world import (
    api,  # noqa: F401  (fixture)
    files_dir,  # noqa: F401  (fixture)
    with_file,
    world_settings,  # noqa: F401  (fixture)
)
from tests.sql_plans import recording


def write(
    client: TestClient,
    tenant: IssuedKey,
    key: str,
    session_id: str | None = None,
    created_at: str | None = None,
) -> int:
    message: dict[str, object] = {"role": "user", "content": f"hello {key}"}
    if created_at is not None:
        message["created_at"] = created_at
    body: dict[str, object] = {"messages": [message]}
    if session_id is not None:
        body["session_id"] = session_id
    r = client.post(f"/v1/conversations/{key}/messages", headers=auth(tenant), json=body)
    assert r.status_code == 200, r.text
    return int(r.json()["conversation_id"])


def age(db: Database, conversation_id: int, days: float) -> None:
    """Make the conversation look idle for ``days`` (its last write that long ago)."""
    with db.transaction() as session:
        session.execute(
            update(Conversation)
            .where(Conversation.id == conversation_id)
            .values(updated_at=utcnow() - timedelta(days=days))
        )


def pages(client: TestClient, tenant: IssuedKey, query: str) -> list[list[int]]:
    out: list[list[int]] = []
    cursor = ""
    while True:
        r = client.get(f"/v1/conversations?limit=2{query}{cursor}", headers=auth(tenant))
        assert r.status_code == 200, r.text
        body = r.json()
        out.append([c["conversation_id"] for c in body["conversations"]])
        if body["next_cursor"] is None:
            return out
        cursor = f"&cursor={body['next_cursor']}"


def test_list_pages_and_filters(
    db: Database,
    tenant: IssuedKey,
    api: TestClient,  # noqa: F811
) -> None:
    other = new_tenant(db, "other")
    a1 = write(api, tenant, "team/a/1", "s1")
    a1_next = write(api, tenant, "team/a/1", "s2")  # archives a1
    a2 = write(api, tenant, "team/a/2")
    b1 = write(api, tenant, "team/b/1")
    solo = write(api, tenant, "Team/a/x")  # another case: not under the prefix
    write(api, other, "team/a/1")
    age(db, a2, 10)

    everything = pages(api, tenant, "")
    assert everything == [[solo, b1], [a2, a1_next], [a1]]
    assert pages(api, tenant, "&prefix=team/a/") == [[a2, a1_next], [a1]]
    assert pages(api, tenant, "&prefix=team/a/&archived=true") == [[a1]]
    assert pages(api, tenant, "&prefix=team/a/&archived=false") == [[a2, a1_next]]
    since = (utcnow() - timedelta(days=1)).isoformat().replace("+00:00", "Z")
    assert pages(api, tenant, f"&prefix=team/&updated_since={since}") == [[b1, a1_next], [a1]]

    first = api.get("/v1/conversations?limit=1", headers=auth(tenant)).json()
    item = first["conversations"][0]
    assert item["session_key"] == "Team/a/x"
    assert item["messages"] == 1
    assert not item["archived"]
    assert item["context_tokens"] > 0
    assert item["updated_at"]
    r = api.get("/v1/conversations?cursor=garbage", headers=auth(tenant))
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "invalid_cursor"
    r = api.get("/v1/conversations?updated_since=2026-01-01T00:00:00", headers=auth(tenant))
    assert r.status_code == 400


def test_retention_erases_idle_conversations_only(
    db: Database,
    tenant: IssuedKey,
    api: TestClient,  # noqa: F811
    world_settings: Settings,  # noqa: F811
    files_dir: Path,  # noqa: F811
) -> None:
    other = new_tenant(db, "other")
    idle = write(api, tenant, "idle")
    r = api.post(
        "/v1/conversations/idle/messages",
        headers=auth(tenant),
        json={"messages": [with_file("idle file line\n" * 12_000, "f.log", 0, "idle")]},
    )
    assert r.status_code == 200, r.text
    # Bootstrapped yesterday from an old transcript: its messages are old, it is not idle.
    recent = write(api, tenant, "recent", created_at="2020-01-01T00:00:00Z")
    untouched = write(api, other, "idle")  # the other tenant keeps everything forever
    for cid in (idle, untouched):
        age(db, cid, 45)
    age(db, recent, 1)
    r = api.patch("/v1/tenant/settings", headers=auth(tenant), json={"retention_days": 30})
    assert r.status_code == 200
    assert r.json()["effective"]["retention_days"] == 30
    storage = LocalFileStorage(files_dir)
    blobs = [p for p in files_dir.rglob("*") if p.is_file()]
    assert len(blobs) == 1

    outcome = sweep_retention(db.transaction, db.read_session, storage, world_settings, utcnow())

    assert outcome.erased == [idle]
    assert outcome.skipped == []
    with db.read_session() as session:
        left = set(session.scalars(select(Conversation.id)))
        assert (
            session.scalars(select(Message).where(Message.conversation_id == idle)).first() is None
        )
    assert left == {recent, untouched}
    assert not blobs[0].exists()
    # Nothing more is due.
    assert (
        sweep_retention(db.transaction, db.read_session, storage, world_settings, utcnow()).erased
        == []
    )


def test_the_sweep_reads_every_tenants_retention_in_one_statement(
    db: Database,
    tenant: IssuedKey,
    api: TestClient,  # noqa: F811
    world_settings: Settings,  # noqa: F811
    files_dir: Path,  # noqa: F811
) -> None:
    for n in range(5):
        new_tenant(db, f"kept-{n}")  # no retention: nothing of theirs is looked for
    write(api, tenant, "recent")
    r = api.patch("/v1/tenant/settings", headers=auth(tenant), json={"retention_days": 30})
    assert r.status_code == 200
    with recording(db.engine) as statements:
        outcome = sweep_retention(
            db.transaction, db.read_session, LocalFileStorage(files_dir), world_settings, utcnow()
        )
    assert outcome.erased == []
    reads = [s for s, _ in statements if s.lstrip().upper().startswith("SELECT")]
    # The tenants' overrides, then the one tenant with retention's idle conversations.
    assert len(reads) == 2, reads
    assert "FROM tenants" in reads[0]
    assert "FROM conversations" in reads[1]


def test_beat_schedules_the_retention_sweep() -> None:
    import workers.tasks.retention  # noqa: F401  (registers the task, as the worker does)
    from workers.celery_app import app, beat_schedule

    entries = {e["task"] for e in beat_schedule(Settings()).values()}
    assert "retention.sweep" in entries
    assert "retention.sweep" in app.tasks

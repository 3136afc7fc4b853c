"""Erasing on real databases: nothing left of what goes, nothing touched of what stays."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, text

from lcm.compaction.service import owe_compaction
from lcm.compaction.steps import Step
from lcm.db.engine import Database
from lcm.db.models import Conversation, LargeFile
from lcm.erasure.service import erase_conversation, erase_tenant
from lcm.files.storage import LocalFileStorage
from lcm.retrieval.search_backlog import index_search_backlog
from lcm.settings import Settings
from lcm.tenants.service import IssuedKey
from tests.conftest import auth, new_tenant
from tests.integration.erasure_world import (
    BlockingProvider,
    Owned,
    api,  # noqa: F401  (fixture)
    assert_only_erased,
    build_conversation,
    census,
    files_dir,  # noqa: F401  (fixture)
    jobs,
    messages,
    post,
    world_settings,  # noqa: F401  (fixture)
)
from tests.sql_plans import recording, sequential_scans


def blobs(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def stale_search_entries(db: Database, word: str, erased_summaries: set[str]) -> int:
    """Search-index entries left behind: matches of ``word`` beyond the live rows holding it,
    plus index rows of erased summaries. Postgres keeps its tsvector in the row itself."""
    with db.read_session() as session:
        live = int(
            session.scalar(
                text("SELECT count(*) FROM messages WHERE content LIKE :like"),
                {"like": f"%{word}%"},
            )
            or 0
        )
        if db.dialect == "postgresql":
            indexed = session.scalar(
                text(
                    "SELECT count(*) FROM messages WHERE content_tsv @@ to_tsquery('english', :w)"
                ),
                {"w": word},
            )
            return int(indexed or 0) - live
        stale = 0
        for table in ("messages_fts", "messages_trigram"):
            indexed = session.scalar(
                text(f"SELECT count(*) FROM {table} WHERE {table} MATCH :w"), {"w": word}
            )
            stale += int(indexed or 0) - live
        for table in ("summaries_fts", "summaries_trigram"):
            stale += len(
                set(session.scalars(text(f"SELECT summary_id FROM {table}"))) & erased_summaries
            )
        return stale


def test_erasing_a_conversation_with_a_pass_in_flight(
    caplog: pytest.LogCaptureFixture,
    db: Database,
    tenant: IssuedKey,
    api: TestClient,  # noqa: F811
    world_settings: Settings,  # noqa: F811
    files_dir: Path,  # noqa: F811
) -> None:
    other_tenant = new_tenant(db, "other")
    erased_id = build_conversation(
        db, api, world_settings, tenant.tenant_id, tenant.api_key, "gone", "zebraquux"
    )
    kept_id = build_conversation(
        db, api, world_settings, tenant.tenant_id, tenant.api_key, "kept", "keptword"
    )
    build_conversation(
        db, api, world_settings, other_tenant.tenant_id, other_tenant.api_key, "gone", "zebraquux"
    )
    # A pass in flight: new messages make a leaf pass due, and its LLM call is held.
    post(api, "gone", tenant.api_key, messages(40, seed=9, marker="zebraquux", start=500))
    with db.transaction() as session:
        owe_compaction(session, tenant.tenant_id, erased_id, "manual", 4_000, 500, mode="inline")
    provider = BlockingProvider()
    outcome: list[Step] = []
    runner = threading.Thread(
        target=lambda: outcome.append(jobs(db, world_settings, provider).wake(erased_id))
    )
    runner.start()
    assert provider.entered.wait(30), "the pass never reached the summarizer"

    owned = Owned.of(db, {erased_id})
    erased_uris, kept_uris = _uris_of(db, erased_id), _uris_of(db, kept_id)
    shared = erased_uris & kept_uris
    assert len(erased_uris) == 2
    assert len(shared) == 1
    assert len(owned.message_ids) > 150
    if db.dialect == "sqlite":  # the probe sees the erased summaries while they live
        index_search_backlog(db.transaction)  # what the worker job does after each ingest
        assert stale_search_entries(db, "zebraquux", set(owned.summary_ids)) > 0
    before = census(db)
    blobs_before = blobs(files_dir)

    r = api.delete("/v1/conversations/gone", headers=auth(tenant))
    assert r.status_code == 204, r.text
    with caplog.at_level(logging.INFO, logger="lcm.compaction.jobs"):
        provider.release.set()
        runner.join(30)
    # The pass finished after the erase: it found its lease gone, wrote nothing, said so.
    assert [s.action for s in outcome] == ["noop"]
    assert f"compaction pass for conversation {erased_id} dropped" in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]

    after = census(db)
    removed = assert_only_erased(before, after, owned)
    for table in (
        "messages",
        "message_parts",
        "summaries",
        "summary_messages",
        "summary_parents",
        "context_items",
        "large_files",
        "compaction_debt",
        "expansion_grants",
        "compaction_runs",
        "conversations",
    ):
        assert removed[table] > 0, f"nothing of {table} was erased: the test proves nothing"
    assert stale_search_entries(db, "zebraquux", set(owned.summary_ids)) == 0
    with db.read_session() as session:  # the other tenant's copy of the word is still indexed
        assert session.scalar(
            text("SELECT count(*) FROM messages WHERE content LIKE '%zebraquux%'")
        )

    # Stored contents: the unique file went, the one the kept conversation shares stayed.
    unique = {u.removeprefix("local:") for u in erased_uris - shared}
    assert blobs(files_dir) == blobs_before - unique
    assert {u.removeprefix("local:") for u in kept_uris} <= blobs(files_dir)

    # The kept conversation still assembles; the erased family is gone.
    assert (
        api.post(
            "/v1/conversations/kept/assemble", headers=auth(tenant), json={"token_budget": 8_000}
        ).json()["conversation_id"]
        == kept_id
    )
    assert api.get("/v1/conversations/gone/status", headers=auth(tenant)).status_code == 404
    assert api.delete("/v1/conversations/gone", headers=auth(tenant)).status_code == 404


def _uris_of(db: Database, conversation_id: int) -> set[str]:
    with db.read_session() as session:
        return set(
            session.scalars(
                select(LargeFile.storage_uri).where(LargeFile.conversation_id == conversation_id)
            )
        )


def test_erasing_one_session_refused_while_a_later_one_uses_its_summaries(
    db: Database,
    tenant: IssuedKey,
    api: TestClient,  # noqa: F811
    world_settings: Settings,  # noqa: F811
) -> None:
    with db.transaction() as session:
        from lcm.tenants.service import update_overrides

        update_overrides(session, tenant.tenant_id, {"new_session_retain_depth": 0})
    first = build_conversation(
        db,
        api,
        world_settings,
        tenant.tenant_id,
        tenant.api_key,
        "fam",
        "first",
        unique_file=False,
    )
    r = api.post(
        "/v1/conversations/fam/messages",
        headers=auth(tenant),
        json={"session_id": "s2", "messages": [{"role": "user", "content": "new session"}]},
    )
    assert r.status_code == 200, r.text
    second = r.json()["conversation_id"]
    r = api.delete(f"/v1/conversations/fam?conversation_id={first}", headers=auth(tenant))
    assert r.status_code == 409
    assert r.json()["error"]["code"] == "conversation_referenced"
    # Erasing the later one first, then the earlier one, works; so does the whole family.
    assert (
        api.delete("/v1/conversations/fam?session_id=s2", headers=auth(tenant)).status_code == 204
    )
    with db.read_session() as session:
        assert session.get(Conversation, second) is None
        assert session.get(Conversation, first) is not None
    assert (
        api.delete(
            f"/v1/conversations/fam?conversation_id={first}", headers=auth(tenant)
        ).status_code
        == 204
    )


def test_erasing_a_tenant(
    db: Database,
    tenant: IssuedKey,
    api: TestClient,  # noqa: F811
    world_settings: Settings,  # noqa: F811
    files_dir: Path,  # noqa: F811
) -> None:
    other = new_tenant(db, "other")
    for key in ("a", "b"):
        build_conversation(db, api, world_settings, tenant.tenant_id, tenant.api_key, key, key)
    build_conversation(db, api, world_settings, other.tenant_id, other.api_key, "a", "a")
    before = census(db)
    other_blobs = {b for b in blobs(files_dir) if b.startswith(other.tenant_id)}

    r = api.delete("/v1/tenant", headers=auth(tenant))
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "confirm_required"
    assert api.delete("/v1/tenant?confirm=acme", headers=auth(tenant)).status_code == 204

    after = census(db)
    for table, rows in after.items():
        mine = [r for r in rows if tenant.tenant_id in (r.get("tenant_id"), r.get("id"))]
        assert not mine, f"{table}: rows of the erased tenant remain"
        theirs_before = [r for r in before[table] if r.get("tenant_id") == other.tenant_id]
        theirs_after = [r for r in rows if r.get("tenant_id") == other.tenant_id]
        assert len(theirs_after) == len(theirs_before), table
    assert before["messages"]
    assert any(r.get("tenant_id") == tenant.tenant_id for r in before["messages"])
    assert blobs(files_dir) == other_blobs  # the tenant's stored files went, the other's stayed
    # Its key went with it.
    assert api.get("/v1/conversations", headers=auth(tenant)).status_code == 401
    assert api.get("/v1/conversations", headers=auth(other)).status_code == 200


def test_storage_delete_is_idempotent(tmp_path: Path) -> None:
    storage = LocalFileStorage(tmp_path)
    uri = storage.put("t1", "a" * 64, b"x")
    storage.delete(uri)
    storage.delete(uri)
    assert not (tmp_path / "t1" / "aa" / ("a" * 64)).exists()


@pytest.mark.parametrize("db", ["postgres"], indirect=True)
@pytest.mark.parametrize("what", ["tenant", "conversation"])
def test_an_erasure_reads_no_table_whole(
    db: Database,
    tenant: IssuedKey,
    api: TestClient,  # noqa: F811
    world_settings: Settings,  # noqa: F811
    what: str,
) -> None:
    """Every statement of an erasure finds its rows through an index (``tests/sql_plans.py``).

    Otherwise erasing one tenant or conversation would read every tenant's
    rows of a table: a cost that grows with the whole deployment, not with
    what is erased.
    """
    other = new_tenant(db, "other")
    cid = build_conversation(db, api, world_settings, tenant.tenant_id, tenant.api_key, "a", "a")
    build_conversation(db, api, world_settings, other.tenant_id, other.api_key, "b", "b")
    with recording(db.engine) as statements, db.transaction() as session:
        if what == "tenant":
            erase_tenant(session, tenant.tenant_id)
        else:
            erase_conversation(session, tenant.tenant_id, cid)
    assert any(s.lstrip().upper().startswith("DELETE FROM MESSAGE_PARTS") for s, _ in statements)
    scans = sequential_scans(db.engine, statements)
    assert scans == [], "\n\n".join(scans)


def test_a_tenant_erase_reports_each_statement_and_all_of_them(
    db: Database, tenant: IssuedKey
) -> None:
    reports: list[tuple[int, int]] = []
    with db.transaction() as session:
        erase_tenant(session, tenant.tenant_id, lambda done, total: reports.append((done, total)))
    total = reports[-1][1]
    assert total > 10  # one delete per table the tenant owns rows in, and the tenant
    assert reports == [(done, total) for done in range(1, total + 1)]

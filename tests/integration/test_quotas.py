"""Storage quotas: a batch that would pass one is refused whole; concurrency never overshoots."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from lcm.content import IncomingMessage
from lcm.db.engine import Database
from lcm.db.models import ContextItem, LargeFile, Message, MessagePart, Tenant
from lcm.ingest.service import ingest_messages, prepare_batch
from lcm.tenants.quota import StorageQuota
from lcm.tenants.service import IssuedKey
from tests.conftest import RecordingSender, auth, new_tenant


@pytest.fixture
def quota_client(db: Database, tmp_path: Path, sender: RecordingSender) -> Iterator[TestClient]:
    from api.app import create_app
    from workers.link import CeleryLink

    settings = db.settings.model_copy(update={"files_dir": tmp_path / "files"})
    app = create_app(
        settings, link=CeleryLink(), database=db, broker_ping=lambda: True, sender=sender
    )
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def stored_rows(db: Database, tenant_id: str) -> dict[str, int]:
    """Every row ingest writes for the tenant, and its counters."""
    with db.read_session() as session:
        counts = {
            model.__tablename__: int(
                session.scalar(
                    select(func.count()).select_from(model).where(model.tenant_id == tenant_id)
                )
                or 0
            )
            for model in (Message, MessagePart, ContextItem, LargeFile)
        }
        tenant = session.get(Tenant, tenant_id)
        assert tenant is not None
        counts["counter_messages"] = tenant.stored_messages
        counts["counter_file_bytes"] = tenant.stored_file_bytes
    return counts


def batch(*ids: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": f"message {i}", "id": i} for i in ids]}


def test_a_batch_over_the_message_quota_is_refused_whole(
    db: Database, tenant: IssuedKey, quota_client: TestClient
) -> None:
    headers = auth(tenant)
    r = quota_client.patch("/v1/tenant/settings", json={"max_stored_messages": 5}, headers=headers)
    assert r.status_code == 200, r.text
    assert r.json()["effective"]["max_stored_messages"] == 5
    url = "/v1/conversations/agent%3Amain/messages"
    assert quota_client.post(url, json=batch("a", "b", "c"), headers=headers).status_code == 200

    before = stored_rows(db, tenant.tenant_id)
    r = quota_client.post(url, json=batch("d", "e", "f"), headers=headers)
    assert r.status_code == 429, r.text
    assert r.json()["error"]["code"] == "quota_exceeded"
    assert "Retry-After" not in r.headers  # waiting frees nothing
    assert stored_rows(db, tenant.tenant_id) == before  # nothing of the batch was written
    assert before["messages"] == before["counter_messages"] == 3

    # Duplicates are not stored, so they do not count; exactly at the cap is allowed.
    r = quota_client.post(url, json=batch("a", "b", "d", "e"), headers=headers)
    assert r.status_code == 200, r.text
    assert r.json() == {**r.json(), "ingested": 2, "duplicates": 2}
    after = stored_rows(db, tenant.tenant_id)
    assert after["messages"] == after["counter_messages"] == 5

    # Raising the quota (a tenant override, null = the deployment default) lets ingest go on.
    r = quota_client.patch(
        "/v1/tenant/settings", json={"max_stored_messages": None}, headers=headers
    )
    assert r.status_code == 200
    assert quota_client.post(url, json=batch("g"), headers=headers).status_code == 200


def test_a_file_over_the_byte_quota_is_refused(
    db: Database, tenant: IssuedKey, quota_client: TestClient
) -> None:
    headers = auth(tenant)
    r = quota_client.patch(
        "/v1/tenant/settings",
        json={"max_file_bytes": 50_000, "large_file_token_threshold": 1_000},
        headers=headers,
    )
    assert r.status_code == 200, r.text
    url = "/v1/conversations/files/messages"
    small = "x" * 30_000  # stored as a large file: ~7,500 tokens, 30,000 bytes
    one = {"messages": [{"role": "user", "content": f'<file name="a.txt">{small}</file>'}]}
    assert quota_client.post(url, json=one, headers=headers).status_code == 200
    before = stored_rows(db, tenant.tenant_id)
    assert before["large_files"] == 1
    assert before["counter_file_bytes"] == 30_000

    r = quota_client.post(url, json=one, headers=headers)  # 60,000 bytes > 50,000
    assert r.status_code == 413, r.text
    assert r.json()["error"]["code"] == "quota_exceeded"
    assert stored_rows(db, tenant.tenant_id) == before

    # Plain messages are not files: they still go in.
    assert quota_client.post(url, json=batch("plain"), headers=headers).status_code == 200


def test_quotas_are_per_tenant(db: Database, tenant: IssuedKey, quota_client: TestClient) -> None:
    other = new_tenant(db, "other")
    quota_client.patch("/v1/tenant/settings", json={"max_stored_messages": 1}, headers=auth(tenant))
    url = "/v1/conversations/k/messages"
    assert quota_client.post(url, json=batch("a"), headers=auth(tenant)).status_code == 200
    assert quota_client.post(url, json=batch("b"), headers=auth(tenant)).status_code == 429
    assert quota_client.post(url, json=batch("a", "b"), headers=auth(other)).status_code == 200


def test_concurrent_batches_never_pass_the_quota(pg_db: Database) -> None:
    """Eight threads race batches of 4 into their own conversations under a cap of 10.

    The charge locks the tenant row until each batch commits, so exactly two
    batches fit (8 messages) and the rest are refused: no overshoot at all,
    and the counter matches the rows.
    """
    tenant = new_tenant(pg_db, "racer")
    quota = StorageQuota(max_messages=10)
    start = threading.Barrier(8)
    outcomes: list[str] = []

    def ingest(n: int) -> None:
        prepared = prepare_batch(
            [IncomingMessage("user", f"m{n}-{i}", f"{n}-{i}") for i in range(4)],
            max_batch=10,
            max_chars=1_000,
        )
        start.wait()
        try:
            with pg_db.transaction() as session:
                ingest_messages(session, tenant.tenant_id, f"conv-{n}", None, prepared, quota=quota)
            outcomes.append("stored")
        except Exception as exc:  # the refusal, raised out of the transaction
            outcomes.append(type(exc).__name__)

    threads = [threading.Thread(target=ingest, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    print(f"\noutcomes: {sorted(outcomes)}")
    assert outcomes.count("stored") == 2
    assert outcomes.count("MessageQuotaExceeded") == 6
    rows = stored_rows(pg_db, tenant.tenant_id)
    assert rows["messages"] == rows["counter_messages"] == 8


def test_erasing_a_conversation_gives_its_quota_back(
    db: Database, tenant: IssuedKey, quota_client: TestClient
) -> None:
    headers = auth(tenant)
    r = quota_client.patch("/v1/tenant/settings", json={"max_stored_messages": 4}, headers=headers)
    assert r.status_code == 200, r.text
    first = "/v1/conversations/first/messages"
    assert quota_client.post(first, json=batch("a", "b", "c"), headers=headers).status_code == 200
    second = "/v1/conversations/second/messages"
    assert quota_client.post(second, json=batch("x", "y")).status_code == 401
    assert quota_client.post(second, json=batch("x", "y"), headers=headers).status_code == 429
    r = quota_client.delete("/v1/conversations/first", headers=headers)
    assert r.status_code == 204, r.text
    assert stored_rows(db, tenant.tenant_id)["counter_messages"] == 0
    assert quota_client.post(second, json=batch("x", "y"), headers=headers).status_code == 200
    assert stored_rows(db, tenant.tenant_id)["counter_messages"] == 2


def test_an_import_is_charged_to_the_quota(
    db: Database, tenant: IssuedKey, quota_client: TestClient
) -> None:
    headers = auth(tenant)
    first = "/v1/conversations/first/messages"
    assert quota_client.post(first, json=batch("a", "b", "c"), headers=headers).status_code == 200
    export = quota_client.get("/v1/conversations/first/export", headers=headers)
    assert export.status_code == 200, export.text
    r = quota_client.patch("/v1/tenant/settings", json={"max_stored_messages": 5}, headers=headers)
    assert r.status_code == 200, r.text
    before = stored_rows(db, tenant.tenant_id)
    imported = quota_client.post(
        "/v1/conversations/copy/import", content=export.content, headers=headers
    )
    assert imported.status_code == 429, imported.text
    assert imported.json()["error"]["code"] == "quota_exceeded"
    assert stored_rows(db, tenant.tenant_id) == before  # refused whole
    r = quota_client.patch("/v1/tenant/settings", json={"max_stored_messages": 6}, headers=headers)
    assert r.status_code == 200, r.text
    imported = quota_client.post(
        "/v1/conversations/copy/import", content=export.content, headers=headers
    )
    assert imported.status_code == 200, imported.text
    assert stored_rows(db, tenant.tenant_id)["counter_messages"] == 6

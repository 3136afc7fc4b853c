"""Erasing a secret from a large file: the object stored again, the row and counters follow.

Both backends; the file directory is the test's own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select

from lcm.db.engine import Database
from lcm.db.models import LargeFile, SecretSpan, Tenant
from lcm.files.storage import LocalFileStorage
from lcm.secrets import is_placeholder
from lcm.tenants.service import IssuedKey
from tests.conftest import auth
from tests.e2e.test_secret_access_http import key
from tests.e2e.test_secret_masking_http import BASE, KEY, SAMPLES, files_client, strings

__all__ = ["files_client"]  # the leak test's fixture, used here


def test_erasing_a_value_stores_the_large_file_again_without_it(
    files_client: TestClient, tenant: IssuedKey, db: Database, tmp_path: Path
) -> None:
    aws, other = SAMPLES[0].secrets[0], SAMPLES[1].secrets[0]
    filler = "\n".join(f"LINE_{i}=value number {i}" for i in range(12_000))
    body = f"{filler}\nAWS_ACCESS_KEY_ID={aws}\nAWS_SECRET_ACCESS_KEY={other}\n"
    text = f'Here is my env\n<file name="prod.env">{body}</file>\nthat was it'
    r = files_client.post(
        f"{BASE}/messages",
        headers=auth(tenant),
        json={"messages": [{"role": "user", "content": text, "id": "m1"}]},
    )
    assert r.status_code == 200, r.text
    with db.read_session() as s:
        file = s.scalars(select(LargeFile)).one()
        old_uri, old_size = file.storage_uri, file.byte_size
    storage = LocalFileStorage(tmp_path / "files")
    assert aws in storage.get(old_uri).decode()
    vault = key(files_client, tenant, "vault", "read", "admin", "secrets")

    def page(**params: Any) -> str:
        got = files_client.get(f"/v1/files/{file.id}", headers=vault, params=params)
        assert got.status_code == 200, got.text
        return strings(got.json())

    assert aws in page(with_secrets="true", offset=len(filler) - 10)
    r = files_client.post("/v1/tenant/secrets/erase", headers=auth(tenant), json={"value": aws})
    assert r.status_code == 200, r.text
    assert r.json()["files"] == 1
    assert r.json()["file_spans"] == 0
    shown = page(with_secrets="true", offset=len(filler) - 10)
    assert aws not in shown
    assert "AWS_ACCESS_KEY_ID=[secret:aws_key#" in shown
    assert other in shown  # the other secret of the file stays, as stored
    grep = {"pattern": "AWS_ACCESS_KEY_ID", "scope": "files", "session_key": KEY}
    found = files_client.post("/v1/grep", headers=auth(tenant), json=grep)
    assert found.status_code == 200, found.text
    assert aws not in strings(found.json())
    with db.read_session() as s:
        file = s.scalars(select(LargeFile)).one()
        stored = storage.get(file.storage_uri).decode()
        counted = s.scalar(select(Tenant.stored_file_bytes).where(Tenant.id == tenant.tenant_id))
        spans = list(s.scalars(select(SecretSpan).where(SecretSpan.file_id == file.id)))
    assert aws not in stored
    assert file.byte_size == len(stored.encode()) != old_size
    assert counted == file.byte_size
    assert file.storage_uri != old_uri
    assert not (tmp_path / "files" / old_uri.removeprefix("local:")).exists()  # released
    for span in spans:
        value = stored[span.char_offset : span.char_offset + span.char_length]
        assert is_placeholder(value) == (span.erased_at is not None), value
    again = files_client.post("/v1/tenant/secrets/erase", headers=auth(tenant), json={"value": aws})
    assert again.json()["spans"] == 0

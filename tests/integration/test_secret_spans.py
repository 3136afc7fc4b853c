"""Secret spans: recorded with the batch that stores the text, which stays as sent."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import delete, select

from lcm.db.engine import Database
from lcm.db.models import LargeFile, Message, MessagePart, SecretSpan
from lcm.files.storage import LocalFileStorage
from lcm.tenants.keys import create_key
from lcm.tenants.service import IssuedKey
from tests.conftest import RecordingSender, auth

AWS_ID = "AKIA" + "Z7Q4" * 4
GITHUB = "ghp_" + "Yx3k" * 9
PASSWORD = "Tr0ub4dor-and-3"
ENV_DUMP = f"$ cat .env\nNODE_ENV=production\nDATABASE_URL=postgres://app:{PASSWORD}@db:5432/app\n"


@pytest.fixture
def files_client(db: Database, tmp_path: Path, sender: RecordingSender) -> Iterator[TestClient]:
    from api.app import create_app
    from workers.link import CeleryLink

    settings = db.settings.model_copy(update={"files_dir": tmp_path / "files"})
    app = create_app(
        settings, link=CeleryLink(), database=db, broker_ping=lambda: True, sender=sender
    )
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def spans(db: Database) -> list[SecretSpan]:
    with db.read_session() as s:
        return list(s.scalars(select(SecretSpan).order_by(SecretSpan.id)))


def span_text(db: Database, span: SecretSpan) -> str:
    """The stored text a span points into, cut at the span."""
    with db.read_session() as s:
        part = s.scalars(
            select(MessagePart).where(
                MessagePart.message_id == span.message_id, MessagePart.ordinal == span.part
            )
        ).one()
    return part.text[span.char_offset : span.char_offset + span.char_length]


MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "id": "u1", "content": f"déjà 🙂 use key {AWS_ID} and token {GITHUB}"},
    {
        "role": "assistant",
        "id": "a1",
        "content": [
            {"type": "text", "text": "Reading the env file."},
            {"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": "cat .env"}},
        ],
    },
    {
        "role": "user",
        "id": "r1",
        "content": [{"type": "tool_result", "tool_use_id": "t1", "content": ENV_DUMP}],
    },
    {"role": "assistant", "id": "a2", "content": f"Rotate {GITHUB} first."},
]


def test_ingest_records_spans_and_stores_the_messages_as_sent(
    db: Database, tenant: IssuedKey, client: TestClient
) -> None:
    url = "/v1/conversations/agent%3Amain/messages"
    r = client.post(url, headers=auth(tenant), json={"messages": MESSAGES})
    assert r.status_code == 200, r.text
    found = spans(db)
    assert [(span_text(db, s), s.kind, s.part) for s in found] == [
        (AWS_ID, "aws_key", 0),
        (GITHUB, "github_token", 0),
        (PASSWORD, "password_in_url", 0),
        (GITHUB, "github_token", 0),
    ]
    # Offsets count code points: "déjà 🙂 " is 7 of them (10 UTF-8 bytes, 8 UTF-16 units).
    assert found[0].char_offset == len("déjà 🙂 use key ")
    # One value, one ordinal, across messages; distinct values, distinct ordinals.
    assert [s.ordinal for s in found] == [1, 2, 3, 2]
    assert found[1].message_id != found[3].message_id
    assert found[1].fingerprint == found[3].fingerprint
    assert all(GITHUB not in s.fingerprint and len(s.fingerprint) == 64 for s in found)
    assert {s.conversation_id for s in found} == {r.json()["conversation_id"]}
    assert {s.tenant_id for s in found} == {tenant.tenant_id}
    with db.read_session() as s:
        rows = list(s.scalars(select(Message).order_by(Message.seq)))
        payloads = [
            [
                p.payload
                for p in s.scalars(
                    select(MessagePart)
                    .where(MessagePart.message_id == m.id)
                    .order_by(MessagePart.ordinal)
                )
            ]
            for m in rows
        ]
    # Byte for byte as sent: the content and every block.
    assert rows[0].content == MESSAGES[0]["content"]
    assert rows[3].content == MESSAGES[3]["content"]
    assert payloads[1] == MESSAGES[1]["content"]
    assert payloads[2] == MESSAGES[2]["content"]
    # A later batch numbers on from the conversation's ordinals.
    more = {"messages": [{"role": "user", "id": "u2", "content": f"{AWS_ID} or AKIA{'B8' * 8}?"}]}
    assert client.post(url, headers=auth(tenant), json=more).status_code == 200
    assert [s.ordinal for s in spans(db)[4:]] == [1, 4]


def test_a_refused_batch_writes_no_spans(
    db: Database, tenant: IssuedKey, client: TestClient
) -> None:
    url = "/v1/conversations/agent%3Amain/messages"
    bad = {"messages": [MESSAGES[0], {"role": "wizard", "content": f"token {GITHUB}"}]}
    r = client.post(url, headers=auth(tenant), json=bad)
    assert r.status_code == 400
    assert spans(db) == []
    # Refused after the rows and spans were written (the quota is charged last):
    # the transaction rolls back whole.
    patch = {"max_stored_messages": 1}
    assert client.patch("/v1/tenant/settings", json=patch, headers=auth(tenant)).status_code == 200
    r = client.post(url, headers=auth(tenant), json={"messages": MESSAGES[:2]})
    assert r.status_code == 429, r.text
    assert r.json()["error"]["code"] == "quota_exceeded"
    assert spans(db) == []
    with db.read_session() as s:
        assert s.scalars(select(Message)).first() is None


def test_a_large_file_is_scanned_where_it_is_stored(
    db: Database, tenant: IssuedKey, files_client: TestClient, tmp_path: Path
) -> None:
    filler = "\n".join(f"LINE_{i}=value number {i}" for i in range(12_000))
    body = f"{filler}\nAWS_ACCESS_KEY_ID={AWS_ID}\n"
    text = f'Here is my env\n<file name="prod.env">{body}</file>\nand {AWS_ID} again'
    r = files_client.post(
        "/v1/conversations/k/messages",
        headers=auth(tenant),
        json={"messages": [{"role": "user", "content": text, "id": "m1"}]},
    )
    assert r.status_code == 200, r.text
    with db.read_session() as s:
        file = s.scalars(select(LargeFile)).one()
    found = spans(db)
    in_file = [x for x in found if x.file_id is not None]
    in_message = [x for x in found if x.message_id is not None]
    assert len(in_file) == 1
    assert (in_file[0].file_id, in_file[0].message_id, in_file[0].part) == (file.id, None, None)
    stored = LocalFileStorage(tmp_path / "files").get(file.storage_uri).decode("utf-8")
    assert stored == body
    offset, length = in_file[0].char_offset, in_file[0].char_length
    assert stored[offset : offset + length] == AWS_ID
    # The message keeps the reference and the pasted key after it: one span, same ordinal.
    assert [span_text(db, x) for x in in_message] == [AWS_ID]
    assert in_message[0].ordinal == in_file[0].ordinal == 1


def test_an_import_is_scanned_and_an_erase_removes_the_spans(
    db: Database, tenant: IssuedKey, client: TestClient
) -> None:
    url = "/v1/conversations/src/messages"
    assert client.post(url, headers=auth(tenant), json={"messages": MESSAGES}).status_code == 200
    with db.transaction() as s:  # originals need the secrets scope
        vault = create_key(s, tenant.tenant_id, "vault", ["admin", "secrets"])
    exported = client.get(
        "/v1/conversations/src/export", headers=auth(vault), params={"with_secrets": "true"}
    )
    assert exported.status_code == 200
    before = {(span_text(db, s), s.kind, s.ordinal) for s in spans(db)}
    with db.transaction() as s:  # only the import can write the copy's spans
        s.execute(delete(SecretSpan))
    r = client.post("/v1/conversations/copy/import", headers=auth(tenant), content=exported.content)
    assert r.status_code == 200, r.text
    copied = spans(db)
    assert {s.conversation_id for s in copied} == {r.json()["conversation_id"]}
    assert {(span_text(db, s), s.kind, s.ordinal) for s in copied} == before
    lines = [json.loads(line) for line in exported.text.splitlines()]
    assert any(GITHUB in line.get("content", "") for line in lines)  # asked for the originals
    assert client.delete("/v1/conversations/copy", headers=auth(tenant)).status_code == 204
    assert spans(db) == []


def test_concurrent_batches_number_each_value_once(db: Database, tenant: IssuedKey) -> None:
    """Ordinals are max + 1 under the conversation's row lock: racing batches agree.

    Six batches race into one conversation, each with the shared token and a
    key of its own. Without the lock two batches could both take the same
    next ordinal for different keys, or give the shared token two.
    """
    from lcm.content import IncomingMessage
    from lcm.ingest.service import ingest_messages, prepare_batch
    from tests.concurrency import race

    def send(writer: int, text: str) -> None:
        message = IncomingMessage("user", text, client_id=f"{writer}-{text[:8]}")
        batch = prepare_batch([message], max_batch=10, max_chars=10_000)
        with db.transaction() as session:
            ingest_messages(session, tenant.tenant_id, "hot", None, batch)

    send(99, "the conversation exists first")
    raced = race(6, lambda w: send(w, f"push with {GITHUB} and AKIA{w:016d} now"))
    assert raced.errors == []
    found = spans(db)
    assert len(found) == 12
    by_value = {span_text(db, s): s.ordinal for s in found}
    assert len(by_value) == 7  # the shared token and six keys, each with one ordinal
    assert sorted(by_value.values()) == list(range(1, 8))
    assert len({(s.fingerprint, s.ordinal) for s in found}) == 7


def test_a_fork_records_the_copied_messages_spans_for_the_child(
    db: Database, tenant: IssuedKey, client: TestClient
) -> None:
    base = "/v1/conversations"
    r = client.post(f"{base}/parent/messages", headers=auth(tenant), json={"messages": MESSAGES})
    assert r.status_code == 200, r.text
    parent_spans = {(span_text(db, s), s.kind, s.ordinal) for s in spans(db)}
    body = {"parent_session_key": "parent", "mode": "fork"}
    out = client.post(f"{base}/child/fork", json=body, headers=auth(tenant))
    assert out.status_code == 200, out.text
    child = out.json()["conversation_id"]
    copied = [s for s in spans(db) if s.conversation_id == child]
    assert {(span_text(db, s), s.kind, s.ordinal) for s in copied} == parent_spans


def test_a_bootstrap_records_the_transcripts_spans(
    db: Database, tenant: IssuedKey, client: TestClient
) -> None:
    fixture = Path(__file__).parents[1] / "fixtures" / "transcripts" / "pi_v3_branches.jsonl"
    stripe = "sk_live_" + "Pq8r" * 6
    transcript = fixture.read_text(encoding="utf-8")
    assert transcript.count("app = FastAPI()") == 1
    # In the JSON string of a tool result: an escaped newline, then the key.
    transcript = transcript.replace("app = FastAPI()", f"app = FastAPI()\\nSTRIPE_KEY={stripe}")
    url = "/v1/conversations/agent%3Amain/bootstrap"
    r = client.post(url, headers=auth(tenant), json={"transcript_jsonl": transcript})
    assert r.status_code == 200, r.text
    (found,) = spans(db)
    assert (span_text(db, found), found.kind, found.ordinal) == (stripe, "stripe_key", 1)

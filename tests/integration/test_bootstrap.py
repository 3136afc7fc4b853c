"""Bootstrap reconciliation on real databases: anchors, checkpoint, idempotency, races."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select, update

from lcm.content import IncomingMessage
from lcm.db.engine import Database
from lcm.db.models import Conversation, Message
from lcm.ingest.service import ingest_messages, prepare_batch
from lcm.tenants.service import IssuedKey
from lcm.transcripts import parse_transcript
from lcm.transcripts.repository import TranscriptRepository
from lcm.transcripts.service import BootstrapOptions, BootstrapResult, bootstrap_transcript
from tests.concurrency import race
from tests.conftest import auth

FIXTURES = Path(__file__).parents[1] / "fixtures" / "transcripts"
# fixture: (messages, tool pairs)
EXPECTED = {"pi_v1.jsonl": (11, 3), "pi_v3_branches.jsonl": (9, 2), "claude_code.jsonl": (11, 3)}


def load(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def boot(
    db: Database,
    tenant_id: str,
    key: str,
    data: bytes,
    session_id: str | None = None,
    **options: Any,
) -> BootstrapResult:
    return bootstrap_transcript(
        db.transaction, tenant_id, key, session_id, data, BootstrapOptions(**options)
    )


def seqs(db: Database, conversation_id: int) -> list[int]:
    with db.session() as s:
        return list(
            s.scalars(
                select(Message.seq)
                .where(Message.conversation_id == conversation_id)
                .order_by(Message.seq)
            )
        )


def appended(name: str, n: int) -> bytes:
    """``n`` more message entries in the fixture's own format, continuing its last branch."""
    lines = []
    for i in range(n):
        stamp = f"2025-11-20T12:{i:02d}:00.000Z"
        if name == "pi_v1.jsonl":
            entry: dict[str, Any] = {
                "type": "message",
                "timestamp": stamp,
                "message": {"role": "user", "content": f"appended {i}"},
            }
        elif name == "pi_v3_branches.jsonl":
            entry = {
                "type": "message",
                "id": f"e00000{i:02d}",
                "parentId": "c0000010" if i == 0 else f"e00000{i - 1:02d}",
                "timestamp": stamp,
                "message": {"role": "user", "content": f"appended {i}"},
            }
        else:
            entry = {
                "type": "assistant" if i % 2 else "user",
                "uuid": f"x-{i:04d}",
                "parentUuid": None,
                "isSidechain": False,
                "sessionId": "cc000000-0000-4000-8000-000000000001",
                "timestamp": stamp,
                "message": {
                    "role": "assistant" if i % 2 else "user",
                    "content": [{"type": "text", "text": f"appended {i}"}],
                },
            }
        lines.append(json.dumps(entry).encode() + b"\n")
    return b"".join(lines)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_import_then_reimport(db: Database, tenant: IssuedKey, name: str) -> None:
    messages, pairs = EXPECTED[name]
    first = boot(db, tenant.tenant_id, "k", load(name))
    assert (first.imported, first.anchor, first.anchor_seq) == (messages, "empty", None)
    assert seqs(db, first.conversation_id) == list(range(1, messages + 1))
    with db.session() as s:
        assert TranscriptRepository(s).tool_pairs(first.conversation_id) == pairs
    again = boot(db, tenant.tenant_id, "k", load(name))
    assert (again.imported, again.anchor, again.anchor_seq) == (0, "checkpoint", messages)
    assert seqs(db, first.conversation_id) == list(range(1, messages + 1))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_appending_ten_entries_imports_exactly_ten(
    db: Database, tenant: IssuedKey, name: str
) -> None:
    messages, _ = EXPECTED[name]
    data = load(name)
    boot(db, tenant.tenant_id, "k", data)
    grown = boot(db, tenant.tenant_id, "k", data + appended(name, 10))
    assert (grown.imported, grown.anchor, grown.anchor_seq) == (10, "checkpoint", messages)
    assert grown.transcript_messages == 10  # only the appended part was parsed
    assert seqs(db, grown.conversation_id) == list(range(1, messages + 11))
    # Without the checkpoint the same transcript anchors by id and imports nothing.
    with db.transaction() as s:
        s.execute(update(Conversation).values(bootstrap_checkpoint=None))
    again = boot(db, tenant.tenant_id, "k", data + appended(name, 10))
    assert (again.imported, again.anchor, again.anchor_seq) == (0, "id", messages + 10)


def test_anchor_by_id_after_live_ingest(db: Database, tenant: IssuedKey) -> None:
    """The gateway sent the first five turns live, with its entry ids, then crashed."""
    parsed = parse_transcript(load("pi_v3_branches.jsonl"))
    live = prepare_batch([m.incoming() for m in parsed.messages[:5]], max_batch=10, max_chars=10**6)
    with db.transaction() as s:
        ingest_messages(s, tenant.tenant_id, "k", None, live)
    result = boot(db, tenant.tenant_id, "k", load("pi_v3_branches.jsonl"))
    assert (result.imported, result.anchor, result.anchor_seq) == (4, "id", 5)
    assert seqs(db, result.conversation_id) == list(range(1, 10))


def test_a_rewritten_transcript_anchors_by_content(db: Database, tenant: IssuedKey) -> None:
    """pi migrates a v1 file to v3 on load: new ids, same messages, then the session goes on."""
    v1 = load("pi_v1.jsonl")
    boot(db, tenant.tenant_id, "k", v1)
    entries = [json.loads(line) for line in v1.splitlines()]
    migrated, parent = [{**entries[0], "version": 3}], None
    for i, entry in enumerate(
        entries[1:] + [json.loads(x) for x in appended("pi_v1.jsonl", 3).splitlines()]
    ):
        migrated.append({**entry, "id": f"m{i:07d}", "parentId": parent})
        parent = f"m{i:07d}"
    data = "".join(json.dumps(e) + "\n" for e in migrated).encode()
    result = boot(db, tenant.tenant_id, "k", data)
    assert (result.imported, result.anchor, result.anchor_seq) == (3, "content", 11)


def test_no_anchor_is_a_bounded_import_of_newer_messages(db: Database, tenant: IssuedKey) -> None:
    other = prepare_batch(
        [IncomingMessage("user", "something else entirely", "gw-1", "2025-11-20T10:00:10Z")],
        max_batch=1,
        max_chars=100,
    )
    with db.transaction() as s:
        ingest_messages(s, tenant.tenant_id, "k", None, other)
    result = boot(db, tenant.tenant_id, "k", load("pi_v3_branches.jsonl"), max_unanchored=2)
    assert (result.anchor, result.anchor_seq, result.imported) == ("none", None, 2)
    with db.session() as s:
        ids = s.scalars(select(Message.client_id).order_by(Message.seq)).all()
    # Three messages are newer than the stored one; the bound keeps the newest two.
    assert ids == ["gw-1", "c0000008", "c0000010"]


def test_concurrent_double_bootstrap_imports_once(db: Database, tenant: IssuedKey) -> None:
    data = load("claude_code.jsonl")
    raced = race(2, lambda _: boot(db, tenant.tenant_id, "race", data), timeout=60)
    results, errors = raced.results, raced.errors
    assert not errors, errors
    assert sorted(r.imported for r in results) == [0, 11]
    assert len({r.conversation_id for r in results}) == 1
    with db.session() as s:
        assert s.scalar(select(func.count()).select_from(Message)) == 11


def test_http_bootstrap(db: Database, tenant: IssuedKey, client: TestClient) -> None:
    url = "/v1/conversations/agent:main/telegram/dm:42/bootstrap"
    body = {"transcript_jsonl": load("pi_v3_branches.jsonl").decode()}
    first = client.post(url, headers=auth(tenant), json=body)
    assert first.status_code == 200, first.text
    assert (first.json()["imported"], first.json()["anchor_seq"]) == (9, None)
    again = client.post(url, headers=auth(tenant), json=body)
    assert (again.json()["imported"], again.json()["anchor_seq"]) == (0, 9)
    bad = client.post(url, headers=auth(tenant), json={"transcript_jsonl": '{"a": 1}\n'})
    assert bad.status_code == 400
    assert bad.json()["error"]["code"] == "invalid_input"
    assert client.post(url, json=body).status_code == 401
    with db.session() as s:
        keys = s.scalars(select(Conversation.session_key)).all()
    assert keys == ["agent:main/telegram/dm:42"]

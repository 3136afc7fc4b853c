"""Large files end to end: a pasted 200 KB file becomes a reference, a row, and a summary."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update

from lcm.db.engine import Database
from lcm.db.models import LargeFile, LlmUsage, Message, MessagePart, utcnow
from lcm.errors import NotFound
from lcm.files.repository import LargeFileRepository
from lcm.files.service import grep_files, load_file, summarize_file
from lcm.files.storage import LocalFileStorage
from lcm.summarize.extractive import ExtractiveProvider
from lcm.summarize.summarizer import Summarizer
from lcm.tenants.service import IssuedKey
from tests.conftest import RecordingSender, auth, new_tenant
from tests.fakes import FakeAnthropicServer
from tests.fakes.anthropic_script import Behaviour
from tests.fakes.providers import anthropic_provider


def big_json() -> str:
    rows = [{"id": i, "email": f"user{i}@example.com", "plan": "pro"} for i in range(3_300)]
    return json.dumps({"users": rows, "generated": "2026-01-01"})


@pytest.fixture
def files_dir(tmp_path: Path) -> Path:
    return tmp_path / "files"


@pytest.fixture
def files_client(db: Database, files_dir: Path, sender: RecordingSender) -> Iterator[TestClient]:
    from api.app import create_app
    from workers.link import CeleryLink

    settings = db.settings.model_copy(update={"files_dir": files_dir})
    app = create_app(
        settings, link=CeleryLink(), database=db, broker_ping=lambda: True, sender=sender
    )
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def test_a_pasted_200kb_file(
    db: Database,
    tenant: IssuedKey,
    files_client: TestClient,
    files_dir: Path,
    sender: RecordingSender,
) -> None:
    body = big_json()
    assert len(body.encode()) > 200_000
    text = f'Can you check these users?\n<file name="users.json">{body}</file>'
    r = files_client.post(
        "/v1/conversations/k/messages",
        headers=auth(tenant),
        json={"messages": [{"role": "user", "content": text, "id": "m1"}]},
    )
    assert r.status_code == 200, r.text
    with db.session() as s:
        message = s.scalars(select(Message)).one()
        part = s.scalars(select(MessagePart)).one()
        row = s.scalars(select(LargeFile)).one()
    assert message.content.startswith('Can you check these users?\n<file name="users.json">')
    assert f"[LCM File: {row.id} | users.json | application/json | " in message.content
    assert len(message.content) < 500
    assert message.token_count < 150
    assert row.id in part.payload["text"]
    assert body not in part.payload["text"]
    assert (row.message_id, row.conversation_id, row.byte_size) == (
        message.id,
        message.conversation_id,
        len(body.encode()),
    )
    assert row.sha256 == hashlib.sha256(body.encode()).hexdigest()
    assert row.exploration_summary is None
    assert sender.files == [row.id]  # enqueued once, after the commit

    storage = LocalFileStorage(files_dir)
    other = new_tenant(db, "other")
    with db.session() as s:
        loaded = load_file(s, storage, tenant.tenant_id, row.id)
        assert loaded.content == body
        assert loaded.name == "users.json"
        with pytest.raises(NotFound):
            load_file(s, storage, other.tenant_id, row.id)
        found = grep_files(s, storage, [row.conversation_id], lambda line: "user3299@" in line)
        assert [(m.file_id, m.line) for m in found] == [(row.id, 1)]
        assert grep_files(s, storage, [row.conversation_id], lambda line: "nobody@" in line) == []

    later = utcnow() + timedelta(seconds=1)
    with db.session() as s:  # what a reconciler would re-send: only files still unsummarized
        assert LargeFileRepository(s).missing_summaries(later, 10) == [row.id]
        assert LargeFileRepository(s).missing_summaries(row.created_at, 10) == []
    outcome = summarize_file(db.transaction, storage, Summarizer(ExtractiveProvider()), row.id)
    assert outcome is not None
    assert (outcome.kind, outcome.written) == ("json", True)
    assert summarize_file(db.transaction, storage, None, row.id) is None  # a duplicate job
    with db.session() as s:
        assert LargeFileRepository(s).missing_summaries(later, 10) == []
    with db.session() as s:
        summary = s.scalars(select(LargeFile.exploration_summary)).one()
    assert summary is not None
    assert summary.startswith("JSON object with 2 keys. users: array[3,300] of object{id, email")

    # Describe over HTTP returns the content, paged by characters.
    first = files_client.get(f"/v1/files/{row.id}?limit=100000", headers=auth(tenant)).json()
    assert first["content"]["total_chars"] == len(body)
    assert first["content"]["offset"] == 0
    assert first["content"]["text"] == body[:100_000]
    pages = [first["content"]["text"]]
    offset = first["content"]["next_offset"]
    while offset is not None:
        page = files_client.get(
            f"/v1/files/{row.id}", params={"offset": offset, "limit": 100_000}, headers=auth(tenant)
        ).json()["content"]
        pages.append(page["text"])
        offset = page["next_offset"]
    assert "".join(pages) == body
    assert len(pages) == -(-len(body) // 100_000)
    whole = files_client.get(f"/v1/files/{row.id}", headers=auth(tenant)).json()["content"]
    assert whole["text"] == body
    assert whole["next_offset"] is None

    # A retry of the same message is a duplicate: no second file, nothing enqueued.
    again = files_client.post(
        "/v1/conversations/k/messages",
        headers=auth(tenant),
        json={"messages": [{"role": "user", "content": text, "id": "m1"}]},
    )
    assert again.json()["duplicates"] == 1
    with db.session() as s:
        assert len(s.scalars(select(LargeFile.id)).all()) == 1
    assert sender.files == [row.id]


def test_large_tool_result_through_turns_and_bootstrap(
    db: Database, tenant: IssuedKey, files_client: TestClient, sender: RecordingSender
) -> None:
    output = "\n".join(f"{i:06d} INFO request served in {i % 97} ms" for i in range(4_000))
    turn = files_client.post(
        "/v1/conversations/t/turns",
        headers=auth(tenant),
        json={
            "token_budget": 1_000_000,
            "messages": [
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "tu1", "name": "logs", "input": {}}],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "tu1", "content": output}],
                },
            ],
        },
    )
    assert turn.status_code == 200, turn.text
    assert turn.json()["context_tokens"] < 500
    line = {
        "type": "message",
        "timestamp": "2026-01-01T00:00:00Z",
        "message": {
            "role": "toolResult",
            "toolCallId": "c1",
            "toolName": "read",
            "content": [{"type": "text", "text": output + " (from the transcript)"}],
            "isError": False,
        },
    }
    r = files_client.post(
        "/v1/conversations/b/bootstrap",
        headers=auth(tenant),
        json={"transcript_jsonl": json.dumps(line) + "\n"},
    )
    assert r.status_code == 200, r.text
    with db.session() as s:
        ids = s.scalars(select(LargeFile.id).order_by(LargeFile.created_at)).all()
    assert len(ids) == 2
    assert sender.files == list(ids)
    assert r.json()["file_ids"] == [ids[1]]


def test_prose_goes_to_the_llm_with_a_deterministic_fallback(
    db: Database, tenant: IssuedKey, files_client: TestClient, files_dir: Path
) -> None:
    prose = "# Launch plan\n" + "We will launch in March after the security review. " * 3_000
    files_client.post(
        "/v1/conversations/p/messages",
        headers=auth(tenant),
        json={"messages": [{"role": "user", "content": f'<file name="plan.md">{prose}</file>'}]},
    )
    with db.session() as s:
        file_id = s.scalars(select(LargeFile.id)).one()
    storage = LocalFileStorage(files_dir)
    with FakeAnthropicServer() as fake:
        llm = Summarizer(anthropic_provider(fake.base_url, "m"))
        fake.script(["500"])  # the summarizer stops at the first provider failure
        failed = summarize_file(db.transaction, storage, llm, file_id)
        assert failed is not None
        assert failed.model == "structure"
        with db.transaction() as s:
            s.execute(update(LargeFile).values(exploration_summary=None))
        fake.script([Behaviour.reply("A launch plan: ship in March, after the security review.")])
        done = summarize_file(db.transaction, storage, llm, file_id)
        sample = fake.requests[-1].body["messages"][0]["content"]
    assert done is not None
    assert (done.kind, done.model) == ("prose", "m")
    assert "[middle of file]" in sample
    assert len(sample) < 40_000
    with db.session() as s:
        summary = s.scalars(select(LargeFile.exploration_summary)).one()
        usage = s.scalars(select(LlmUsage)).all()
    assert summary is not None
    assert summary.startswith("A launch plan: ship in March")
    assert [(u.purpose, u.model) for u in usage] == [("file", "m")]


def test_grep_scope_files_searches_inside_large_files(
    db: Database, tenant: IssuedKey, files_client: TestClient
) -> None:
    text = f'<file name="users.json">{big_json()}</file>'
    files_client.post(
        "/v1/conversations/k/messages",
        headers=auth(tenant),
        json={"messages": [{"role": "user", "content": text, "id": "m1"}]},
    )
    with db.session() as s:
        file_id = s.scalars(select(LargeFile.id)).one()
    regex = files_client.post(
        "/v1/grep",
        headers=auth(tenant),
        json={"pattern": r"user32\d\d@example", "scope": "files", "session_key": "k"},
    )
    assert regex.status_code == 200, regex.text
    (match,) = regex.json()["matches"]
    assert (match["type"], match["id"], match["line"]) == ("file", file_id, 1)
    assert "«user3200@example»" in match["snippet"]
    words = files_client.post(
        "/v1/grep",
        headers=auth(tenant),
        json={
            "pattern": "user3299@example.com pro",
            "mode": "full_text",
            "scope": "files",
            "session_key": "k",
        },
    )
    assert [m["id"] for m in words.json()["matches"]] == [file_id]
    absent = files_client.post(
        "/v1/grep",
        headers=auth(tenant),
        json={
            "pattern": "user3299 -pro",
            "mode": "full_text",
            "scope": "files",
            "session_key": "k",
        },
    )
    assert absent.json()["matches"] == []
    # Another tenant's scope never reaches this file.
    other = new_tenant(db, "other")
    theirs = files_client.post(
        "/v1/grep",
        headers=auth(other),
        json={"pattern": "user3299", "scope": "files", "all_conversations": True},
    )
    assert theirs.status_code == 200
    assert theirs.json()["matches"] == []
    # Nor do the message or summary scopes see inside the file.
    messages = files_client.post(
        "/v1/grep",
        headers=auth(tenant),
        json={"pattern": "user3299@", "scope": "both", "session_key": "k"},
    )
    assert messages.json()["matches"] == []


def test_grep_file_ids_searches_only_those_files(
    db: Database, tenant: IssuedKey, files_client: TestClient
) -> None:
    texts = [
        f'<file name="a.json">{big_json()}</file>',
        f'<file name="b.json">{big_json()}</file> and a second copy, renamed',
    ]
    for n, text in enumerate(texts):
        sent = files_client.post(
            "/v1/conversations/k/messages",
            headers=auth(tenant),
            json={"messages": [{"role": "user", "content": text, "id": f"f{n}"}]},
        )
        assert sent.status_code == 200, sent.text
    with db.session() as s:
        first, second = s.scalars(select(LargeFile.id).order_by(LargeFile.created_at)).all()

    def grep(**body: Any) -> Any:
        query = {"pattern": r"user3200@example", "session_key": "k", **body}
        return files_client.post("/v1/grep", headers=auth(tenant), json=query)

    both = grep(scope="files")
    assert sorted(m["id"] for m in both.json()["matches"]) == sorted([first, second])
    only = grep(file_ids=[second])  # scope left out: file_ids search files
    assert only.status_code == 200, only.text
    assert [m["id"] for m in only.json()["matches"]] == [second]
    assert only.json()["notes"] == []
    explicit = grep(file_ids=[first], scope="files")
    assert [m["id"] for m in explicit.json()["matches"]] == [first]
    # An id the scope does not hold finds nothing, and says so.
    other = new_tenant(db, "other")
    files_client.post(
        "/v1/conversations/theirs/messages",
        headers=auth(other),
        json={"messages": [{"role": "user", "content": texts[0], "id": "x"}]},
    )
    with db.session() as s:
        theirs = s.scalars(select(LargeFile.id).where(LargeFile.tenant_id == other.tenant_id)).one()
    foreign = grep(file_ids=[theirs, first])
    assert [m["id"] for m in foreign.json()["matches"]] == [first]
    assert foreign.json()["notes"] == [f"not in this scope: {theirs}"]
    # Refused: another scope with file_ids, a malformed id, an empty list.
    for refused in (
        grep(file_ids=[first], scope="messages"),
        grep(file_ids=["sum_0123456789abcdef"]),
        grep(file_ids=[]),
    ):
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["code"] == "invalid_input"

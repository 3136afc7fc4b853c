"""Content hygiene over HTTP: images as large files, injected context kept out of summaries,
heartbeat turns left out of assembly, id-less messages deduplicated by event key, replay
floods refused, old tool payloads stubbed."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from lcm.db.engine import Database
from lcm.db.models import LargeFile, Message, MessagePart
from lcm.tenants.service import IssuedKey
from tests.conftest import RecordingSender, auth
from tests.e2e.test_sessions_http import patch, post
from tests.fakes import FakeAnthropicServer
from tests.integration.test_tenant_overrides import with_llm


def png(size: int) -> bytes:
    return b"\x89PNG\r\n\x1a\n" + os.urandom(size - 8)


def texts(assembled: dict[str, Any]) -> str:
    return json.dumps(assembled["messages"])


def read_file(client: TestClient, tenant: IssuedKey, file_id: str) -> tuple[dict[str, Any], str]:
    offset: int | None = 0
    pages: list[str] = []
    described: dict[str, Any] = {}
    while offset is not None:
        r = client.get(f"/v1/files/{file_id}?offset={offset}", headers=auth(tenant))
        assert r.status_code == 200, r.text
        described = r.json()
        pages.append(described["content"]["text"])
        offset = described["content"]["next_offset"]
    return described, "".join(pages)


def test_large_images_are_stored_as_files(
    client: TestClient, tenant: IssuedKey, db: Database, sender: RecordingSender
) -> None:
    patch(client, tenant, large_image_bytes_threshold=4096)
    big, small, inline = png(20_000), png(1_000), png(6_000)
    url = "data:image/png;base64," + base64.b64encode(inline).decode()

    def image(data: bytes) -> dict[str, Any]:
        encoded = base64.b64encode(data).decode()
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": encoded},
        }

    message = {
        "role": "user",
        "id": "u1",
        "content": [
            {"type": "text", "text": f"look at these, and this one: {url} thanks"},
            image(big),
            image(small),
        ],
    }
    r = post(client, tenant, "k", "messages", {"messages": [message]})
    assert r.status_code == 200, r.text
    with db.session() as s:
        files = s.scalars(select(LargeFile).order_by(LargeFile.byte_size)).all()
        stored = json.dumps([p.payload for p in s.scalars(select(MessagePart)).all()])
    assert [(f.mime, f.byte_size) for f in files] == [("image/png", 6_000), ("image/png", 20_000)]
    assert base64.b64encode(big).decode() not in stored
    assert base64.b64encode(inline).decode() not in stored
    assert base64.b64encode(small).decode() in stored  # under the threshold: stays inline
    assembled = post(client, tenant, "k", "assemble", {"token_budget": 100_000}).json()
    for f in files:
        assert f"[LCM Image: {f.id}" in texts(assembled)
    assert '"type": "image"' in texts(assembled)  # the small one
    described, content = read_file(client, tenant, files[1].id)
    assert described["mime"] == "image/png"
    assert described["content"]["encoding"] == "base64"
    assert base64.b64decode(content) == big
    assert sorted(sender.files) == sorted(f.id for f in files)


@pytest.fixture
def llm() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as server:
        yield server


@pytest.fixture
def llm_client(db: Database, llm: FakeAnthropicServer, tmp_path: Path) -> Iterator[TestClient]:
    from api.app import create_app
    from workers.link import CeleryLink

    settings = with_llm(db, llm).model_copy(update={"files_dir": tmp_path / "files"})
    app = create_app(
        settings, link=CeleryLink(), database=db, broker_ping=lambda: True, sender=RecordingSender()
    )
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def test_injected_context_is_not_summarized_but_kept(
    llm_client: TestClient, tenant: IssuedKey, db: Database, llm: FakeAnthropicServer
) -> None:
    patch(
        llm_client,
        tenant,
        compaction_mode="inline",
        fresh_tail_count=4,
        leaf_min_fanout=4,
        leaf_chunk_tokens=400,
    )
    memory = '<relevant-memories source="x">\nUser likes SECRET-MEMORY-42\n</relevant-memories>\n'
    messages = [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "id": f"m{i}",
            "content": (memory if i % 2 == 0 else "") + f"turn {i} on the deploy " * 8,
        }
        for i in range(40)
    ]
    r = post(llm_client, tenant, "k", "turns", {"messages": messages, "token_budget": 600})
    assert r.json()["compaction"] == "ran", r.text
    assert llm.requests
    assert all("SECRET-MEMORY-42" not in q.user_text for q in llm.requests)
    assert any("turn 0 on the deploy" in q.user_text for q in llm.requests)
    with db.session() as s:
        kept = s.scalar(select(Message.content).where(Message.client_id == "m0"))
    assert kept is not None
    assert "SECRET-MEMORY-42" in kept


def heartbeat_conversation() -> list[dict[str, Any]]:
    return [
        {"role": "user", "id": "1", "content": "deploy the api please"},
        {"role": "assistant", "id": "2", "content": "deployed"},
        {"role": "user", "id": "3", "content": "[OpenClaw heartbeat poll] read HEARTBEAT.md"},
        {"role": "assistant", "id": "4", "content": "HEARTBEAT_OK"},
        {"role": "user", "id": "5", "content": "[OpenClaw heartbeat poll] read HEARTBEAT.md"},
        {"role": "assistant", "id": "6", "content": "HEARTBEAT_OK - disk 95% full"},
        {"role": "user", "id": "7", "content": "thanks, and the worker?"},
        {"role": "assistant", "id": "8", "content": "also deployed"},
    ]


def test_heartbeat_turns_that_only_say_ok_leave_the_context(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    post(client, tenant, "k", "messages", {"messages": heartbeat_conversation()})
    before = post(client, tenant, "k", "assemble", {"token_budget": 100_000}).json()
    assert '"HEARTBEAT_OK"' in texts(before)
    patch(client, tenant, prune_heartbeat_ok=True)
    after = post(client, tenant, "k", "assemble", {"token_budget": 100_000}).json()
    assert '"HEARTBEAT_OK"' not in texts(after)
    assert "disk 95% full" in texts(after)  # an acknowledgement with news stays
    assert texts(after).count("heartbeat poll") == 1
    assert "also deployed" in texts(after)
    with db.session() as s:
        assert s.scalar(select(func.count()).select_from(Message)) == 8  # all still stored


def tool_turn(result: str) -> list[dict[str, Any]]:
    call = {"type": "tool_use", "id": "toolu_01", "name": "read", "input": {"path": "a"}}
    answer = {"type": "tool_result", "tool_use_id": "toolu_01", "content": result}
    return [
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [answer]},
    ]


def test_messages_without_id_are_deduplicated_by_event_key(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    first = post(client, tenant, "k", "messages", {"messages": tool_turn("file body")})
    assert first.json()["ingested"] == 2
    replay = post(client, tenant, "k", "messages", {"messages": tool_turn("file body")})
    assert replay.json()["ingested"] == 0
    assert replay.json()["duplicates"] == 2
    # The same call id with another result is another event (ids may be reused).
    reused = post(client, tenant, "k", "messages", {"messages": tool_turn("other body")[1:]})
    assert reused.json()["ingested"] == 1
    reply = {"role": "assistant", "content": "done", "response_id": "msg_01abc"}
    assert post(client, tenant, "k", "messages", {"messages": [reply]}).json()["ingested"] == 1
    again = post(client, tenant, "k", "messages", {"messages": [reply, reply]}).json()
    assert again["ingested"] == 0
    assert again["duplicates"] == 2
    with db.session() as s:
        assert s.scalar(select(func.count()).select_from(Message)) == 4


def test_replay_flood_is_refused(client: TestClient, tenant: IssuedKey, db: Database) -> None:
    same = {"role": "user", "content": "hello again"}
    r = post(client, tenant, "k", "messages", {"messages": [same] * 4})
    assert r.status_code == 409
    assert r.json()["error"]["code"] == "replay_flood"
    assert post(client, tenant, "k", "messages", {"messages": [same] * 3}).status_code == 200
    ok = {"role": "tool", "content": '{"ok": true}'}
    assert post(client, tenant, "k", "messages", {"messages": [ok] * 30}).status_code == 200
    with db.session() as s:
        assert s.scalar(select(func.count()).select_from(Message)) == 33


def test_old_large_tool_payloads_are_stubbed_in_assembly(
    client: TestClient, tenant: IssuedKey
) -> None:
    payload = "line of a long file\n" * 200
    conversation = [
        {"role": "user", "id": "1", "content": "read the file"},
        *[{**m, "id": f"t{i}"} for i, m in enumerate(tool_turn(payload))],
        {"role": "assistant", "id": "4", "content": "read it"},
        {"role": "user", "id": "5", "content": "and now?"},
        {"role": "assistant", "id": "6", "content": "nothing else"},
    ]
    post(client, tenant, "k", "messages", {"messages": conversation})
    patch(client, tenant, fresh_tail_count=2)
    plain = post(client, tenant, "k", "assemble", {"token_budget": 100_000}).json()
    assert texts(plain).count("line of a long file") == 200
    patch(client, tenant, stub_large_tool_payloads=True, stub_tool_payload_tokens=100)
    stubbed = post(client, tenant, "k", "assemble", {"token_budget": 100_000}).json()
    assert "line of a long file" not in texts(stubbed)
    assert "[LCM Tool Output: message #3" in texts(stubbed)
    assert stubbed["estimated_tokens"] < plain["estimated_tokens"] - 500
    # In the fresh tail a payload is always sent whole.
    patch(client, tenant, fresh_tail_count=10)
    fresh = post(client, tenant, "k", "assemble", {"token_budget": 100_000}).json()
    assert texts(fresh).count("line of a long file") == 200

"""Export → erase → import gives back the same messages and the same DAG."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select

from lcm.db.engine import Database
from lcm.db.models import (
    ContextItem,
    LargeFile,
    Message,
    MessagePart,
    Summary,
    SummaryMessage,
    SummaryParent,
)
from lcm.files.storage import LocalFileStorage
from lcm.settings import Settings
from lcm.tenants.service import IssuedKey
from tests.conftest import auth
from tests.integration.erasure_world import (
    api,  # noqa: F401  (fixture)
    build_conversation,
    files_dir,  # noqa: F401  (fixture)
    post,
    world_settings,  # noqa: F401  (fixture)
)

TOOL_TURN: list[dict[str, object]] = [
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "checking"},
            {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {"path": "/srv"}},
        ],
        "provider": "anthropic",
        "model": "claude-sonnet-4-5",
    },
    {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a\nb"}],
    },
]


def shape(db: Database, storage: LocalFileStorage, conversation_id: int) -> dict[str, Any]:
    """Everything a conversation holds, named by seq and summary id (not row ids)."""
    with db.read_session() as s:
        seq = dict(
            s.execute(
                select(Message.id, Message.seq).where(Message.conversation_id == conversation_id)
            ).all()
        )
        parts: dict[int, list[tuple[Any, ...]]] = {}
        for p in s.scalars(
            select(MessagePart).where(MessagePart.message_id.in_(seq)).order_by(MessagePart.ordinal)
        ):
            parts.setdefault(seq[p.message_id], []).append(
                (p.ordinal, p.part_type, p.text, p.tool_call_id, json.dumps(p.payload))
            )
        messages = [
            (
                m.seq,
                m.role,
                m.content,
                m.content_shape,
                m.token_count,
                m.created_at,
                m.client_id,
                parts.get(m.seq, []),
                m.provider,
                m.model,
            )
            for m in s.scalars(
                select(Message)
                .where(Message.conversation_id == conversation_id)
                .order_by(Message.seq)
            )
        ]
        summaries = {
            x.id: (
                x.kind,
                x.depth,
                x.content,
                x.token_count,
                x.source_token_count,
                x.earliest_at,
                x.latest_at,
                x.descendant_count,
                x.file_ids,
                x.escalation,
                x.model,
                x.degraded,
            )
            for x in s.scalars(select(Summary).where(Summary.conversation_id == conversation_id))
        }
        leaf_links = sorted(
            (sid, o, seq[mid])
            for sid, mid, o in s.execute(
                select(
                    SummaryMessage.summary_id, SummaryMessage.message_id, SummaryMessage.ordinal
                ).where(SummaryMessage.summary_id.in_(summaries))
            )
        )
        parent_links = sorted(
            s.execute(
                select(
                    SummaryParent.summary_id, SummaryParent.parent_id, SummaryParent.ordinal
                ).where(SummaryParent.summary_id.in_(summaries))
            ).all()
        )
        context = [
            (
                c.ordinal,
                c.item_type,
                seq.get(c.message_id) if c.message_id else None,
                c.summary_id,
                c.token_count,
            )
            for c in s.scalars(
                select(ContextItem)
                .where(ContextItem.conversation_id == conversation_id)
                .order_by(ContextItem.ordinal)
            )
        ]
        files = sorted(
            (
                f.id,
                f.name,
                f.mime,
                f.byte_size,
                f.sha256,
                f.token_count,
                seq.get(f.message_id) if f.message_id else None,
                storage.get(f.storage_uri),
            )
            for f in s.scalars(
                select(LargeFile).where(LargeFile.conversation_id == conversation_id)
            )
        )
    return {
        "messages": messages,
        "summaries": summaries,
        "leaf_links": leaf_links,
        "parent_links": [tuple(r) for r in parent_links],
        "context": context,
        "files": files,
    }


def test_export_erase_import_round_trip(
    db: Database,
    tenant: IssuedKey,
    api: TestClient,  # noqa: F811
    world_settings: Settings,  # noqa: F811
    files_dir: Path,  # noqa: F811
) -> None:
    storage = LocalFileStorage(files_dir)
    cid = build_conversation(
        db, api, world_settings, tenant.tenant_id, tenant.api_key, "rt", "roundtrip"
    )
    post(api, "rt", tenant.api_key, TOOL_TURN)
    with db.transaction() as s:  # one summary as an LLM outage leaves it (lcm doctor)
        first = s.scalars(select(Summary).where(Summary.conversation_id == cid)).first()
        assert first is not None
        first.degraded = "llm_error"
    original = shape(db, storage, cid)
    assert any(summary[-1] == "llm_error" for summary in original["summaries"].values())
    assert original["parent_links"]
    assert original["leaf_links"]
    assert len(original["files"]) == 2
    assert any(p[1] == "tool_use" for m in original["messages"] for p in m[7])
    assert ("anthropic", "claude-sonnet-4-5") in {m[8:] for m in original["messages"]}
    assembled = api.post(
        "/v1/conversations/rt/assemble", headers=auth(tenant), json={"token_budget": 50_000}
    ).json()

    exported = api.get("/v1/conversations/rt/export", headers=auth(tenant))
    assert exported.status_code == 200
    assert exported.headers["content-type"].startswith("application/x-ndjson")
    lines = exported.text.splitlines()
    assert json.loads(lines[0])["type"] == "conversation"

    assert api.delete("/v1/conversations/rt", headers=auth(tenant)).status_code == 204
    assert api.get("/v1/conversations/rt/status", headers=auth(tenant)).status_code == 404

    r = api.post("/v1/conversations/rt/import", headers=auth(tenant), content=exported.content)
    assert r.status_code == 200, r.text
    imported = r.json()
    assert imported["renamed_summaries"] == {}
    assert imported["messages"] == len(original["messages"])
    assert shape(db, storage, imported["conversation_id"]) == original
    again = api.post(
        "/v1/conversations/rt/assemble", headers=auth(tenant), json={"token_budget": 50_000}
    ).json()
    assert again["messages"] == assembled["messages"]
    assert again["summary_count"] == assembled["summary_count"] > 0

    # Importing the same file beside its original is refused: messages name files by id.
    r = api.post("/v1/conversations/copy/import", headers=auth(tenant), content=exported.content)
    assert r.status_code == 409
    assert r.json()["error"]["code"] == "file_id_taken"
    # The target must be empty: a second import into it is refused.
    r = api.post("/v1/conversations/rt/import", headers=auth(tenant), content=exported.content)
    assert r.status_code == 409


def test_import_beside_the_original_renames_taken_summary_ids(
    db: Database,
    tenant: IssuedKey,
    api: TestClient,  # noqa: F811
    world_settings: Settings,  # noqa: F811
    files_dir: Path,  # noqa: F811
) -> None:
    storage = LocalFileStorage(files_dir)
    cid = build_conversation(
        db,
        api,
        world_settings,
        tenant.tenant_id,
        tenant.api_key,
        "orig",
        "orig",
        unique_file=False,
    )
    exported = api.get("/v1/conversations/orig/export", headers=auth(tenant)).content
    # Without its file records (their ids are taken), the rest imports beside the original.
    body = b"\n".join(line for line in exported.splitlines() if json.loads(line)["type"] != "file")
    r = api.post("/v1/conversations/copy/import", headers=auth(tenant), content=body)
    assert r.status_code == 200, r.text
    renamed: dict[str, str] = r.json()["renamed_summaries"]
    original, copy = shape(db, storage, cid), shape(db, storage, r.json()["conversation_id"])
    assert set(renamed) == set(original["summaries"])
    assert {renamed[k]: v for k, v in original["summaries"].items()} == copy["summaries"]
    assert sorted((renamed[s], o, m) for s, o, m in original["leaf_links"]) == copy["leaf_links"]
    assert (
        sorted((renamed[s], renamed[p], o) for s, p, o in original["parent_links"])
        == copy["parent_links"]
    )
    assert [
        (o, t, m, renamed.get(s, s) if s else None, n) for o, t, m, s, n in original["context"]
    ] == copy["context"]
    assert copy["messages"] == original["messages"]


def test_import_refuses_bad_files(
    tenant: IssuedKey,
    api: TestClient,  # noqa: F811
) -> None:
    r = api.post("/v1/conversations/x/import", headers=auth(tenant), content=b'{"type":"message"}')
    assert r.status_code == 400
    assert "line 1" in r.json()["error"]["message"]
    r = api.post("/v1/conversations/x/import", headers=auth(tenant), content=b"")
    assert r.status_code == 400

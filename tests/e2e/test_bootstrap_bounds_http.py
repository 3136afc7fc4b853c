"""The bounds of an unanchored bootstrap over HTTP: newest messages, and their tokens.

A bootstrap that shares nothing recognisable with a non-empty conversation
imports only the transcript's newest messages: at most
``bootstrap_max_unanchored`` of them and at most
``bootstrap_max_unanchored_tokens`` tokens of them. Either bound answers the
same way: 200, ``anchor: "none"``, whole messages only.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select

from lcm.content import IncomingMessage
from lcm.db.engine import Database
from lcm.db.models import Message
from lcm.ingest.service import prepare_batch
from tests.conftest import RecordingSender, api_client, auth, new_tenant

N = 10
TEXT = "the nightly deploy check moved to the release job and the backup restore passed " * 6


def transcript() -> str:
    """A pi v3 transcript of ``N`` messages, all newer than the stored one, none shared."""
    lines = [{"type": "session", "version": 3, "id": "s-1", "timestamp": "2025-11-20T11:00:00Z"}]
    parent = None
    for i in range(N):
        entry_id = f"t{i:04d}"
        lines.append(
            {
                "type": "message",
                "id": entry_id,
                "parentId": parent,
                "timestamp": f"2025-11-20T11:{i + 1:02d}:00.000Z",
                "message": {
                    "role": "user" if i % 2 == 0 else "assistant",
                    "content": f"{i} {TEXT}",
                },
            }
        )
        parent = entry_id
    return "".join(json.dumps(line) + "\n" for line in lines)


def message_tokens() -> int:
    """What each transcript message costs, as ingest counts it (all are the same size)."""
    prepared = prepare_batch([IncomingMessage("user", f"1 {TEXT}")], max_batch=1, max_chars=10**6)
    return prepared[0].token_count


@contextmanager
def client_with(db: Database, **settings: Any) -> Iterator[TestClient]:
    yield from api_client(db.settings.model_copy(update=settings), db, RecordingSender())


Outcome = tuple[int, dict[str, Any], list[str | None]]


def bootstrap(client: TestClient, db: Database, name: str) -> Outcome:
    """Seed a conversation with one unrelated message, bootstrap it; (status, body, client ids)."""
    tenant = new_tenant(db, name)
    key = "agent:main:boot"
    seeded = client.post(
        f"/v1/conversations/{key}/messages",
        json={
            "messages": [
                {
                    "role": "user",
                    "content": "unrelated",
                    "id": "gw-1",
                    "created_at": "2025-11-20T10:00:00Z",
                }
            ]
        },
        headers=auth(tenant),
    )
    assert seeded.status_code == 200, seeded.text
    r = client.post(
        f"/v1/conversations/{key}/bootstrap",
        json={"transcript_jsonl": transcript()},
        headers=auth(tenant),
    )
    body = r.json()
    with db.session() as s:
        ids = list(
            s.scalars(
                select(Message.client_id)
                .where(Message.tenant_id == tenant.tenant_id)
                .order_by(Message.seq)
            )
        )
    return r.status_code, body, ids


def test_the_token_bound_imports_like_the_message_bound(db: Database) -> None:
    tokens = message_tokens()
    with client_with(db, bootstrap_max_unanchored=3, bootstrap_max_unanchored_tokens=None) as c:
        by_count = bootstrap(c, db, "by-count")
    # Room for three and a half messages: the fourth newest is not cut, it is left out.
    within = 3 * tokens + tokens // 2
    with client_with(db, bootstrap_max_unanchored=100, bootstrap_max_unanchored_tokens=within) as c:
        by_tokens = bootstrap(c, db, "by-tokens")
    newest_three = ["gw-1", "t0007", "t0008", "t0009"]
    for status, body, ids in (by_count, by_tokens):
        assert status == 200, body
        assert (body["anchor"], body["anchor_seq"], body["imported"]) == ("none", None, 3)
        assert ids == newest_three
    assert {**by_count[1], "conversation_id": 0} == {**by_tokens[1], "conversation_id": 0}


def test_a_token_bound_below_the_newest_message_imports_nothing(db: Database) -> None:
    with client_with(db, bootstrap_max_unanchored_tokens=message_tokens() - 1) as c:
        status, body, ids = bootstrap(c, db, "tight")
    assert status == 200, body
    assert (body["anchor"], body["imported"]) == ("none", 0)
    assert ids == ["gw-1"]


def test_without_the_token_bound_the_message_bound_alone_applies(db: Database) -> None:
    with client_with(db, bootstrap_max_unanchored_tokens=None) as c:
        status, body, ids = bootstrap(c, db, "unbounded")
    assert status == 200, body
    assert body["imported"] == N
    assert ids == ["gw-1", *(f"t{i:04d}" for i in range(N))]

"""Assemble with ``include_times``: each message's time range, aligned with the messages."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select

from lcm.db.engine import Database
from lcm.db.models import Message
from lcm.tenants.keys import IssuedKey
from tests.conftest import auth

BASE = "/v1/conversations/agent%3Atimes"
SENT = [
    ("user", "2026-11-22T10:00:00Z"),
    ("assistant", "2026-11-22T10:00:05.250Z"),
    ("user", "2026-11-22T10:01:00Z"),
    ("user", "2026-11-22T10:02:30Z"),  # merged with the one before (roles alternate)
    ("assistant", "2026-11-22T10:03:00Z"),
]


def assemble(client: TestClient, tenant: IssuedKey, **extra: Any) -> Any:
    body = {"token_budget": 100_000, **extra}
    r = client.post(f"{BASE}/assemble", json=body, headers=auth(tenant))
    assert r.status_code == 200, r.text
    return r.json()


def parse(value: str) -> datetime:
    assert value.endswith("Z"), value
    return datetime.fromisoformat(value)


def stored_times(db: Database) -> list[datetime]:
    with db.read_session() as s:
        return list(s.scalars(select(Message.created_at).order_by(Message.seq)))


def test_message_times_are_the_stored_created_at_aligned_with_the_messages(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    messages = [
        {"role": role, "content": f"message {i}", "id": f"m{i}", "created_at": at}
        for i, (role, at) in enumerate(SENT)
    ]
    r = client.post(f"{BASE}/messages", json={"messages": messages}, headers=auth(tenant))
    assert r.status_code == 200, r.text
    stored = stored_times(db)
    assert stored == [datetime.fromisoformat(at) for _, at in SENT]

    out = assemble(client, tenant, include_times=True)
    assert [m["role"] for m in out["messages"]] == ["user", "assistant", "user", "assistant"]
    assert all(set(m) == {"role", "content"} for m in out["messages"])  # nothing added to them
    times = [{k: parse(v) for k, v in t.items()} for t in out["message_times"]]
    one = [{"created_at": t, "earliest_at": t, "latest_at": t} for t in stored]
    merged = {"created_at": stored[3], "earliest_at": stored[2], "latest_at": stored[3]}
    assert times == [one[0], one[1], merged, one[4]]

    plain = assemble(client, tenant)
    assert plain.get("message_times") is None
    assert plain["messages"] == out["messages"]


def test_summaries_cover_their_range_and_times_stay_aligned(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    settings = {
        "compaction_mode": "inline",
        "fresh_tail_count": 4,
        "leaf_min_fanout": 4,
        "leaf_chunk_tokens": 400,
    }
    patched = client.patch("/v1/tenant/settings", headers=auth(tenant), json=settings)
    assert patched.status_code == 200, patched.text
    messages = [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "id": f"m{i}",
            "content": f"message {i} about the deploy of service {i % 7} " * 8,
            "created_at": 1_800_000_000 + 60 * i,
        }
        for i in range(40)
    ]
    turn = {"messages": messages, "token_budget": 600}
    r = client.post(f"{BASE}/turns", json=turn, headers=auth(tenant))
    assert r.json()["compaction"] == "ran", r.text

    out = assemble(client, tenant, include_times=True)
    assert out["summary_count"] >= 1
    times = [{k: parse(v) for k, v in t.items()} for t in out["message_times"]]
    assert len(times) == len(out["messages"])
    stored = stored_times(db)
    for t in times:
        assert t["created_at"] == t["latest_at"]
        assert stored[0] <= t["earliest_at"] <= t["latest_at"] <= stored[-1]
    # In order, and together they reach from the first message to the last.
    assert [t["latest_at"] for t in times] == sorted(t["latest_at"] for t in times)
    assert (times[0]["earliest_at"], times[-1]["latest_at"]) == (stored[0], stored[-1])
    # The first message opens with a summary: it starts where that summary does.
    opening = out["messages"][0]["content"][0]["text"]
    assert opening.startswith("<summary ")
    earliest = re.search(r'earliest_at="([^"]+)"', opening)
    assert earliest is not None
    assert times[0]["earliest_at"] == parse(earliest.group(1))

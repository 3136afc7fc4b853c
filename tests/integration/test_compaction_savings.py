"""A compaction pass never grows the context it compacts.

Summaries are judged against what they replace in the context, not only
against their rendered input (which carries a timestamp per line), and a
chunk too small for any summary to undercut is not summarized at all.
"""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from lcm.db.engine import Database
from lcm.db.models import Summary
from lcm.tenants.service import IssuedKey, update_overrides
from tests.conftest import auth

BUDGET = 2_000
SMALL = {"compaction_mode": "inline", "fresh_tail_count": 4, "leaf_min_fanout": 4}


def _store(client: TestClient, tenant: IssuedKey, contents: list[str]) -> None:
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "id": f"m-{i}", "content": text}
        for i, text in enumerate(contents)
    ]
    r = client.post(
        "/v1/conversations/k/messages", headers=auth(tenant), json={"messages": messages}
    )
    assert r.status_code in (200, 201), r.text


def _compact(client: TestClient, tenant: IssuedKey) -> dict[str, Any]:
    r = client.post(
        "/v1/conversations/k/compact",
        headers=auth(tenant),
        json={"target_tokens": 1, "token_budget": BUDGET, "wait": True},
    )
    assert r.status_code == 200, r.text
    return dict(r.json())


def _summaries(db: Database) -> int:
    with db.session() as s:
        return int(s.scalar(select(func.count()).select_from(Summary)) or 0)


def test_messages_no_summary_could_undercut_stay_raw(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    with db.transaction() as s:
        update_overrides(s, tenant.tenant_id, SMALL)
    _store(client, tenant, ["ok"] * 12)
    out = _compact(client, tenant)
    assert out["status"] == "done"
    assert out["context_tokens_after"] == out["context_tokens_before"]
    assert _summaries(db) == 0


def test_a_small_chunk_is_summarized_into_less_than_it_held(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    # Eight short lines outside the tail hold 104 tokens: over the floor, but
    # an offline extract of them (a header, then each line with its
    # timestamp) is larger than that once wrapped. The pass has to go down to
    # a clipped truncation to come out smaller.
    with db.transaction() as s:
        update_overrides(s, tenant.tenant_id, SMALL)
    _store(
        client, tenant, [f"fixed bug {i} in lcm/api/routes.py, reran the suite" for i in range(12)]
    )
    out = _compact(client, tenant)
    assert out["status"] == "done"
    assert _summaries(db) >= 1
    assert out["context_tokens_after"] < out["context_tokens_before"]

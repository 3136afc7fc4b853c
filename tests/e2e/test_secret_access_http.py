"""The ``secrets`` scope gets originals back exactly, every such read is audited, and an
admin's erasure removes a secret from every surface for good.

The conversation and its compaction are the leak test's (test_secret_masking_http):
the corpus's secrets in user text, ``tool_result`` blocks and ``tool_use``
inputs, compacted through the real Anthropic SDK against the fake server.
Both backends (the ``db`` fixture).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import func, select, update

from lcm.db.engine import Database
from lcm.db.models import (
    Conversation,
    Message,
    MessagePart,
    SecretRead,
    SecretSpan,
    Summary,
    SummaryMessage,
)
from lcm.secrets import is_placeholder
from lcm.tenants.service import IssuedKey
from tests.conftest import auth, new_tenant
from tests.e2e.test_secret_masking_http import (
    BASE,
    KEY,
    KEYS,
    SECRETS,
    TOKEN,
    compacted,
    conversation,
    export,
    ingest,
    leaks,
    strings,
)

__all__ = ["compacted"]  # the leak test's fixture, used here


def key(client: TestClient, tenant: IssuedKey, name: str, *scopes: str) -> dict[str, str]:
    r = client.post(KEYS, headers=auth(tenant), json={"name": name, "scopes": list(scopes)})
    assert r.status_code == 201, r.text
    return {"Authorization": f"Bearer {r.json()['api_key']}"}


def summary_ids(db: Database, conversation_id: int) -> list[str]:
    with db.read_session() as s:
        return list(s.scalars(select(Summary.id).where(Summary.conversation_id == conversation_id)))


def expand_all(client: TestClient, headers: dict[str, str], ids: list[str], **params: Any) -> Any:
    body = {"summary_ids": ids, "token_cap": 100_000}
    return client.post("/v1/expand", headers=headers, json=body, params=params)


def reads(client: TestClient, headers: dict[str, str], **params: Any) -> list[dict[str, Any]]:
    r = client.get("/v1/tenant/secrets/reads", headers=headers, params=params)
    assert r.status_code == 200, r.text
    return list(r.json()["reads"])


def audit_rows(db: Database) -> int:
    with db.read_session() as s:
        return int(s.scalar(select(func.count()).select_from(SecretRead)) or 0)


def test_a_secrets_key_gets_every_original_back_exactly(
    client: TestClient, tenant: IssuedKey, db: Database, compacted: int
) -> None:
    ids = summary_ids(db, compacted)
    vault = key(client, tenant, "vault", "read", "admin", "secrets")
    reader = key(client, tenant, "ro", "read")
    # Without the scope: placeholders as before, and 403 (JSON) for originals, unrecorded.
    for headers in (reader, auth(tenant)):
        r = expand_all(client, headers, ids, with_secrets="true")
        assert r.status_code == 403, r.text
        assert r.json()["error"]["code"] == "forbidden"
        r = client.get(f"/v1/summaries/{ids[0]}", headers=headers, params={"with_secrets": True})
        assert r.status_code == 403, r.text
        assert leaks(expand_all(client, headers, ids).json()) == []
    assert audit_rows(db) == 0

    expanded = expand_all(client, vault, ids, with_secrets="true")
    assert expanded.status_code == 200, expanded.text
    sent = {m["id"]: m for m in conversation()}
    got = expanded.json()["messages"]
    assert len(got) > 20
    with db.read_session() as s:
        client_ids = dict(s.execute(select(Message.id, Message.client_id)).tuples().all())
    for message in got:  # byte for byte what the gateway sent
        original = sent[client_ids[message["id"]]]
        assert message["message"] == {"role": original["role"], "content": original["content"]}
    originals = [sent[client_ids[m["id"]]] for m in got]
    assert leaks(got) == leaks(originals)
    assert len(leaks(got)) > len(SECRETS) // 2
    for summary_id in ids:
        described = client.get(
            f"/v1/summaries/{summary_id}", headers=vault, params={"with_secrets": "true"}
        )
        assert described.status_code == 200, described.text
    r, whole = export(client, vault, with_secrets="true")
    assert r.status_code == 200, r.text
    assert leaks(whole) == SECRETS

    rows = reads(client, auth(tenant))
    assert [r["surface"] for r in rows] == ["export"] + ["describe_summary"] * len(ids) + ["expand"]
    assert {r["key_name"] for r in rows} == {"vault"}
    assert {r["conversation_id"] for r in rows} == {compacted}
    with db.read_session() as s:
        live = s.scalar(select(func.count()).where(SecretSpan.conversation_id == compacted))
        returned = s.scalar(
            select(func.count()).where(SecretSpan.message_id.in_([m["id"] for m in got]))
        )
    assert rows[0]["span_count"] == live == len(rows[0]["span_ids"])
    assert rows[-1]["span_count"] == returned  # the spans of the messages expand returned
    assert 0 < (returned or 0) < (live or 0)  # the fresh tail's messages were not expanded
    assert all(r["span_count"] == 0 for r in rows[1:-1])  # summaries hold placeholders only


def test_the_audit_is_per_tenant_paged_filtered_and_pruned(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    ingest(client, tenant)
    other = new_tenant(db, "globex")
    r = client.post(f"{BASE}/messages", headers=auth(other), json={"messages": conversation()})
    assert r.status_code == 200, r.text
    mine, theirs = (
        key(client, tenant, "v1", "admin", "secrets"),
        key(client, other, "v2", "admin", "secrets"),
    )
    for _ in range(3):
        assert export(client, mine, with_secrets="true")[0].status_code == 200
    assert export(client, theirs, with_secrets="true")[0].status_code == 200
    first = client.get("/v1/tenant/secrets/reads", headers=auth(tenant), params={"limit": 2})
    assert first.status_code == 200, first.text
    page = first.json()
    assert len(page["reads"]) == 2
    assert page["next_cursor"]
    rest = reads(client, auth(tenant), limit=2, cursor=page["next_cursor"])
    assert len(rest) == 1
    assert {r["key_name"] for r in page["reads"] + rest} == {"v1"}
    assert [r["key_name"] for r in reads(client, auth(other))] == ["v2"]
    key_id = page["reads"][0]["key_id"]
    assert len(reads(client, auth(tenant), key_id=key_id)) == 3
    assert reads(client, auth(tenant), conversation_id=10**12) == []
    bad = client.get("/v1/tenant/secrets/reads", headers=auth(tenant), params={"cursor": "x"})
    assert bad.status_code == 400
    assert bad.json()["error"]["code"]
    # Bounded: a row past the retention goes when the next read is written.
    with db.transaction() as s:
        s.execute(update(SecretRead).values(read_at=datetime.now(UTC) - timedelta(days=400)))
    assert export(client, mine, with_secrets="true")[0].status_code == 200
    assert len(reads(client, auth(tenant))) == 1
    assert len(reads(client, auth(other))) == 1  # another tenant's old rows wait for its own


def stored_text(db: Database, conversation_id: int) -> str:
    """The conversation's stored message contents, part texts and payloads, and summaries."""
    with db.read_session() as s:
        contents = s.scalars(
            select(Message.content).where(Message.conversation_id == conversation_id)
        )
        messages = select(Message.id).where(Message.conversation_id == conversation_id)
        parts = s.execute(
            select(MessagePart.text, MessagePart.payload).where(
                MessagePart.message_id.in_(messages)
            )
        ).all()
        summaries = s.scalars(
            select(Summary.content).where(Summary.conversation_id == conversation_id)
        )
        return strings([list(contents), [[t, p] for t, p in parts], list(summaries)])


def spans_consistent(db: Database, conversation_id: int) -> None:
    """An erased span covers a placeholder, a live one a secret of the corpus."""
    with db.read_session() as s:
        rows = s.execute(
            select(SecretSpan, MessagePart.text)
            .join(
                MessagePart,
                (MessagePart.message_id == SecretSpan.message_id)
                & (MessagePart.ordinal == SecretSpan.part),
            )
            .where(SecretSpan.conversation_id == conversation_id)
        ).all()
    assert rows
    for span, text in rows:
        shown = text[span.char_offset : span.char_offset + span.char_length]
        if span.erased_at is not None:
            assert is_placeholder(shown), shown
        else:
            assert "[secret:" not in shown, shown


def test_erasing_a_secret_removes_it_from_every_surface(
    client: TestClient, tenant: IssuedKey, db: Database, compacted: int
) -> None:
    vault = key(client, tenant, "vault", "read", "admin", "secrets")
    ids = summary_ids(db, compacted)
    with db.read_session() as s:
        seqs = list(s.scalars(select(Message.seq).order_by(Message.id)))
        links = s.scalar(select(func.count()).select_from(SummaryMessage))
        version = s.scalar(select(Conversation.context_version).where(Conversation.id == compacted))
        aws_span = s.scalars(
            select(SecretSpan.id).where(SecretSpan.kind == "aws_key").order_by(SecretSpan.id)
        ).first()
        part_text, offset, length = s.execute(
            select(MessagePart.text, SecretSpan.char_offset, SecretSpan.char_length)
            .join(
                MessagePart,
                (MessagePart.message_id == SecretSpan.message_id)
                & (MessagePart.ordinal == SecretSpan.part),
            )
            .where(SecretSpan.id == aws_span)
        ).one()
    aws = part_text[offset : offset + length]
    assert TOKEN in stored_text(db, compacted)
    assert aws in stored_text(db, compacted)

    # Refused: a reader key, an empty request, an unknown span.
    assert (
        client.post("/v1/tenant/secrets/erase", headers=vault, json={"value": TOKEN}).status_code
        == 200
    )
    r = client.post("/v1/tenant/secrets/erase", headers=auth(tenant), json={})
    assert r.status_code == 400
    assert r.json()["error"]["code"]
    r = client.post("/v1/tenant/secrets/erase", headers=auth(tenant), json={"span_ids": [10**15]})
    assert r.status_code == 404
    assert r.json()["error"]["code"]
    r = client.post("/v1/tenant/secrets/erase", headers=auth(tenant), json={"span_ids": [aws_span]})
    assert r.status_code == 200, r.text
    done = r.json()
    assert done["conversation_ids"] == [compacted]
    assert done["spans"] >= 1
    assert done["messages"] >= 1
    again = client.post(
        "/v1/tenant/secrets/erase", headers=auth(tenant), json={"span_ids": [aws_span]}
    )
    assert again.json()["spans"] == 0
    assert again.json()["messages"] == 0

    gone = [TOKEN, aws]
    assert [g for g in gone if g in stored_text(db, compacted)] == []
    spans_consistent(db, compacted)
    expanded = expand_all(client, vault, ids, with_secrets="true").json()
    shown = strings(expanded)
    assert [g for g in gone if g in shown] == []
    assert "[secret:github_token#" in shown
    assert "[secret:aws_key#" in shown
    r, whole = export(client, vault, with_secrets="true")
    kept = [s for s in SECRETS if not any(g in s for g in gone)]
    assert leaks(whole) == kept  # the other secrets are still there, as sent
    for pattern, mode in ((TOKEN, "regex"), (aws, "full_text"), ("Zx8wZx8w", "regex")):
        body = {"pattern": pattern, "mode": mode, "session_key": KEY, "limit": 200}
        found = client.post("/v1/grep", headers=auth(tenant), json=body)
        assert found.status_code == 200, found.text
        assert found.json()["matches"] == [], pattern
    ok = client.patch(
        "/v1/tenant/settings", headers=auth(tenant), json={"assemble_secrets": "pass"}
    )
    assert ok.status_code == 200, ok.text
    assembled = client.post(f"{BASE}/assemble", headers=auth(tenant), json={"token_budget": 10**6})
    assert [g for g in gone if g in strings(assembled.json())] == []
    with db.read_session() as s:
        assert list(s.scalars(select(Message.seq).order_by(Message.id))) == seqs
        assert s.scalar(select(func.count()).select_from(SummaryMessage)) == links
        bumped = s.scalar(select(Conversation.context_version).where(Conversation.id == compacted))
        assert bumped is not None
        assert version is not None
        assert bumped > version
    assert summary_ids(db, compacted) == ids


def test_a_process_that_cached_views_before_an_erasure_never_shows_the_original(
    db: Database, client: TestClient, tenant: IssuedKey, sender: Any
) -> None:
    """Another API process (its own message cache) assembled before the erasure."""
    from api.app import create_app
    from workers.link import CeleryLink

    ingest(client, tenant)
    other_db = Database(db.settings)
    app = create_app(
        db.settings, link=CeleryLink(), database=other_db, broker_ping=lambda: True, sender=sender
    )
    body = {"token_budget": 10**6}
    try:
        with TestClient(app) as other:
            for mode in ("mask", "pass"):
                patch = {"assemble_secrets": mode}
                assert (
                    client.patch(
                        "/v1/tenant/settings", headers=auth(tenant), json=patch
                    ).status_code
                    == 200
                )
                warm = other.post(f"{BASE}/assemble", headers=auth(tenant), json=body)
                assert warm.status_code == 200, warm.text
            assert TOKEN in strings(warm.json())  # pass mode: as stored, cached now
            r = client.post("/v1/tenant/secrets/erase", headers=auth(tenant), json={"value": TOKEN})
            assert r.status_code == 200, r.text
            assert r.json()["spans"] > 0
            for mode in ("pass", "mask"):
                patch = {"assemble_secrets": mode}
                assert (
                    client.patch(
                        "/v1/tenant/settings", headers=auth(tenant), json=patch
                    ).status_code
                    == 200
                )
                seen = other.post(f"{BASE}/assemble", headers=auth(tenant), json=body)
                assert seen.status_code == 200, seen.text
                assert TOKEN not in strings(seen.json()), mode
                assert "[secret:github_token#" in strings(seen.json())
    finally:
        other_db.dispose()


def test_erasure_by_value_reaches_every_conversation_of_the_tenant_only(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    ingest(client, tenant)
    copy = client.post(
        "/v1/conversations/agent%3Atwin/messages",
        headers=auth(tenant),
        json={"messages": conversation()},
    )
    assert copy.status_code == 200, copy.text
    other = new_tenant(db, "globex")
    theirs = client.post(f"{BASE}/messages", headers=auth(other), json={"messages": conversation()})
    assert theirs.status_code == 200, theirs.text
    r = client.post("/v1/tenant/secrets/erase", headers=auth(tenant), json={"value": TOKEN})
    assert r.status_code == 200, r.text
    assert len(r.json()["conversation_ids"]) == 2
    with db.read_session() as s:
        by_tenant = dict(s.execute(select(Conversation.id, Conversation.tenant_id)).tuples().all())
    for conversation_id, tenant_id in by_tenant.items():
        text = stored_text(db, conversation_id)
        assert (TOKEN in text) == (tenant_id == other.tenant_id)
        spans_consistent(db, conversation_id)
    assert json.dumps(r.json()).count(TOKEN) == 0

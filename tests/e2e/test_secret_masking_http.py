"""Secrets never leave: every surface that shows stored text masks what was detected.

A conversation full of the corpus's secrets (``bench/secrets_corpus.py``) goes
in over HTTP: in user text, in ``tool_result`` blocks and in a ``tool_use``
input. Compaction runs through the real Anthropic SDK against the fake
server; then each surface is read and no original secret may appear in what
it returns (every string of the JSON, so an escaped newline hides nothing),
while the placeholders do.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy import event, select

from api.app import create_app
from bench.secrets_corpus import build_corpus
from lcm.content import IncomingMessage
from lcm.db.engine import Database
from lcm.db.models import ContextItem, Message, Summary, Tenant
from lcm.ingest.service import ingest_messages, prepare_batch
from lcm.retrieval.answers import ExpandQueryRequest
from lcm.retrieval.expansion import execute_expand_query, start_expand_query
from lcm.retrieval.scope import ScopeSelector
from lcm.settings import CompactionSettings
from lcm.summarize.llm import Breakers, LlmClients
from lcm.summarize.summarizer import Summarizer
from lcm.tenants.service import IssuedKey
from tests.conftest import RecordingSender, auth, settings_for
from tests.fakes import Behaviour, FakeAnthropicServer
from tests.fakes.providers import anthropic_provider
from tests.helpers import compact
from tests.servers import embedded_home
from tests.servers import run_lcm as lcm
from workers.link import CeleryLink

KEY = "agent:vault"
BASE = "/v1/conversations/agent%3Avault"
KEYS = "/v1/tenant/keys"
MODEL = "claude-test"
SAMPLES = [s for s in build_corpus(copies=1) if s.secrets]
TOKEN = "ghp_" + "Zx8w" * 9  # sent in every tool call's input
SECRETS = sorted({v for s in SAMPLES for v in s.secrets} | {TOKEN})
SETTINGS = CompactionSettings(
    fresh_tail_count=8,
    leaf_chunk_tokens=3_000,
    leaf_min_fanout=4,
    condensed_min_fanout=2,
    sweep_max_depth=1,
    summary_model=MODEL,
)


def conversation() -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for i, sample in enumerate(SAMPLES):
        command = f'curl -H "Authorization: Bearer {TOKEN}" https://api.example.com/{i}'
        messages += [
            {"role": "user", "id": f"u{i}", "content": f"step {i}, look:\n{sample.text}"},
            {
                "role": "assistant",
                "id": f"a{i}",
                "content": [
                    {"type": "text", "text": f"Checking step {i}."},
                    {
                        "type": "tool_use",
                        "id": f"t{i}",
                        "name": "bash",
                        "input": {"command": command},
                    },
                ],
            },
            {
                "role": "user",
                "id": f"r{i}",
                "content": [
                    {"type": "tool_result", "tool_use_id": f"t{i}", "content": sample.text}
                ],
            },
            {"role": "assistant", "id": f"d{i}", "content": f"Done with step {i}."},
        ]
    return messages


def strings(value: Any) -> str:
    """Every string in a JSON value, joined: what a reader of the response sees."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return "\n".join(strings(k) + "\n" + strings(v) for k, v in value.items())
    if isinstance(value, list):
        return "\n".join(strings(v) for v in value)
    return str(value)


def leaks(value: Any) -> list[str]:
    text = strings(value)
    return [secret for secret in SECRETS if secret in text]


def ingest(client: TestClient, tenant: IssuedKey) -> int:
    r = client.post(f"{BASE}/messages", headers=auth(tenant), json={"messages": conversation()})
    assert r.status_code == 200, r.text
    return int(r.json()["conversation_id"])


def assemble(client: TestClient, tenant: IssuedKey) -> Any:
    r = client.post(f"{BASE}/assemble", headers=auth(tenant), json={"token_budget": 1_000_000})
    assert r.status_code == 200, r.text
    return r.json()


@pytest.fixture
def compacted(db: Database, tenant: IssuedKey, client: TestClient, llm: FakeAnthropicServer) -> int:
    """The conversation, compacted by the fake model into leaves and a condensed summary."""
    cid = ingest(client, tenant)
    provider = anthropic_provider(llm.base_url, MODEL, breakers=Breakers(5, 30))
    compact(db, tenant.tenant_id, cid, SETTINGS, 4_000, summarizer=Summarizer(provider))
    with db.read_session() as s:
        assert s.scalars(select(Summary.id).where(Summary.conversation_id == cid)).first()
    return cid


def test_assemble_masks_by_default_and_passes_when_the_tenant_says(
    client: TestClient, tenant: IssuedKey
) -> None:
    ingest(client, tenant)
    masked = assemble(client, tenant)
    assert leaks(masked["messages"]) == []
    text = strings(masked["messages"])
    assert "[secret:aws_key#" in text
    calls = [
        b
        for m in masked["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_use"
    ]
    assert len(calls) == len(SAMPLES)
    assert calls[0]["input"]["command"].startswith(
        'curl -H "Authorization: Bearer [secret:github_token#'
    )
    results = [
        b
        for m in masked["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_result"
    ]
    assert all("[secret:" in strings(b["content"]) for b in results)

    bad = client.patch(
        "/v1/tenant/settings", headers=auth(tenant), json={"assemble_secrets": "hide"}
    )
    assert bad.status_code in (400, 422), bad.text
    assert "error" in bad.json()
    ok = client.patch(
        "/v1/tenant/settings", headers=auth(tenant), json={"assemble_secrets": "pass"}
    )
    assert ok.status_code == 200, ok.text
    passed = assemble(client, tenant)
    assert leaks(passed["messages"]) == SECRETS  # the stored text, every secret in it
    assert "[secret:" not in strings(passed["messages"])


def test_grep_describe_and_expand_show_placeholders(
    client: TestClient, tenant: IssuedKey, db: Database, compacted: int, llm: FakeAnthropicServer
) -> None:
    for request in llm.requests:  # the summarizer's input was masked already
        assert leaks(request.body) == []
    for pattern, mode in (("AKIA", "regex"), ("Bearer", "regex"), ("step look", "full_text")):
        body = {"pattern": pattern, "mode": mode, "session_key": KEY, "limit": 200}
        r = client.post("/v1/grep", headers=auth(tenant), json=body)
        assert r.status_code == 200, r.text
        matches = r.json()["matches"]
        assert matches, pattern
        assert leaks(matches) == [], pattern
    aws = client.post(
        "/v1/grep", headers=auth(tenant), json={"pattern": "AKIA", "session_key": KEY}
    ).json()["matches"]
    assert any("[secret:aws_key#" in m["snippet"] for m in aws)

    with db.read_session() as s:
        summary_ids = list(
            s.scalars(select(Summary.id).where(Summary.conversation_id == compacted))
        )
    for summary_id in summary_ids:
        described = client.get(f"/v1/summaries/{summary_id}", headers=auth(tenant))
        assert described.status_code == 200, described.text
        assert leaks(described.json()) == []
    expanded = client.post(
        "/v1/expand", headers=auth(tenant), json={"summary_ids": summary_ids, "token_cap": 100_000}
    )
    assert expanded.status_code == 200, expanded.text
    out = expanded.json()
    assert len(out["messages"]) > 20
    assert leaks(out) == []
    assert "[secret:github_token#" in strings(out["messages"])


@pytest.fixture
def expander(db: Database, llm: FakeAnthropicServer) -> LlmClients:
    settings = db.settings.model_copy(
        update={
            "anthropic_api_key": SecretStr("sk-test"),
            "anthropic_base_url": llm.base_url,
            "expansion_model": "claude-expander",
            "llm_max_retries": 0,
        }
    )
    clients = LlmClients.from_settings(settings)
    assert clients is not None
    return clients


def test_expand_query_never_sends_a_secret_to_the_model(
    db: Database,
    tenant: IssuedKey,
    compacted: int,
    llm: FakeAnthropicServer,
    expander: LlmClients,
    client: TestClient,
) -> None:
    """The end-to-end leak check: compaction, then an expand-query reading every tool."""
    with db.read_session() as s:
        leaves = list(
            s.scalars(
                select(Summary.id).where(Summary.conversation_id == compacted, Summary.depth == 0)
            )
        )
        top = s.scalar(
            select(ContextItem.summary_id)
            .where(ContextItem.conversation_id == compacted, ContextItem.summary_id.is_not(None))
            .order_by(ContextItem.ordinal)
        )
    assert leaves
    assert top
    llm.script(
        [
            Behaviour.tool_use("grep", {"pattern": "AKIA|ghp_|sk-|BEGIN", "mode": "regex"}),
            Behaviour.tool_use("grep", {"pattern": "Bearer token", "mode": "full_text"}),
            Behaviour.tool_use("describe", {"id": str(top)}),
            Behaviour.tool_use("expand", {"summary_ids": leaves[:3], "token_cap": 4_000}),
            Behaviour.reply("The keys were rotated."),
        ],
        model="claude-expander",
    )
    settings = db.settings.model_copy(
        update={"expansion_model": "claude-expander", "max_expand_tokens": 8_000}
    )
    request = ExpandQueryRequest("Which keys did we use?", "keys", max_tokens=500)
    with db.transaction() as s:
        grant = start_expand_query(s, tenant.tenant_id, ScopeSelector(KEY), request, settings)
    answer = execute_expand_query(
        db.transaction, grant.id, tenant.tenant_id, request, settings, expander
    )
    assert answer.turns == 5
    asked = llm.requests_for("claude-expander")
    assert len(asked) == 5
    results = strings([r.body["messages"] for r in asked])
    assert "[secret:aws_key#" in results  # the tools did read the secrets' messages
    assert "[secret:github_token#" in results
    for request_seen in llm.requests:  # the summarizer's and the loop's, every one
        assert leaks(request_seen.body) == []
    with db.read_session() as s:
        summaries = list(s.scalars(select(Summary.content)))
    assert leaks(summaries) == []
    assert leaks(assemble(client, tenant)) == []
    r, exported = export(client, auth(tenant))
    assert r.status_code == 200, r.text
    assert leaks(exported) == []


def export(client: TestClient, headers: dict[str, str], **params: Any) -> Any:
    r = client.get(f"{BASE}/export", headers=headers, params=params)
    return r, [json.loads(line) for line in r.text.splitlines() if r.status_code == 200]


def test_exports_are_masked_unless_a_secrets_key_asks_for_the_secrets(
    client: TestClient, tenant: IssuedKey, compacted: int, db: Database
) -> None:
    r, masked = export(client, auth(tenant))
    assert r.status_code == 200, r.text
    assert leaks(masked) == []
    messages = [line for line in masked if line["type"] == "message"]
    assert len(messages) == 4 * len(SAMPLES)
    assert "[secret:github_token#" in strings(messages[1]["parts"][1]["payload"]["input"])
    assert "[secret:" in messages[2]["parts"][0]["text"]
    # An admin key without the secrets scope is refused the originals.
    refused, _ = export(client, auth(tenant), with_secrets="true")
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["code"] == "forbidden"
    vault = client.post(
        KEYS, headers=auth(tenant), json={"name": "vault", "scopes": ["admin", "secrets"]}
    )
    assert vault.status_code == 201, vault.text
    r, whole = export(
        client, {"Authorization": f"Bearer {vault.json()['api_key']}"}, with_secrets="true"
    )
    assert r.status_code == 200, r.text
    assert leaks(whole) == SECRETS

    reader = client.post(KEYS, headers=auth(tenant), json={"name": "ro", "scopes": ["read"]})
    assert reader.status_code == 201, reader.text
    headers = {"Authorization": f"Bearer {reader.json()['api_key']}"}
    for params in ({}, {"with_secrets": "true"}):
        refused, _ = export(client, headers, **params)
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"]["code"]

    # An import of a masked export stores the placeholders: the secrets are gone for good.
    body = "".join(json.dumps(line) + "\n" for line in masked)
    r = client.post(
        "/v1/conversations/agent%3Acopy/import",
        headers={**auth(tenant), "Content-Type": "application/x-ndjson"},
        content=body,
    )
    assert r.status_code == 200, r.text
    copy_id = r.json()["conversation_id"]
    with db.read_session() as s:
        stored = list(s.scalars(select(Message.content).where(Message.conversation_id == copy_id)))
    assert len(stored) == 4 * len(SAMPLES)
    assert leaks(stored) == []
    assert "[secret:aws_key#" in strings(stored)


def test_cli_export_and_messages_mask_unless_with_secrets(tmp_path: Path) -> None:
    url, _key = embedded_home(tmp_path / "home", "acme")
    env = {"LCM_DATABASE_URL": url, "LCM_FILES_DIR": str(tmp_path / "files")}
    database = Database(settings_for(url))
    with database.transaction() as session:
        tenant_id = session.scalars(select(Tenant.id)).one()
        batch = prepare_batch(
            [IncomingMessage("user", sample.text) for sample in SAMPLES],
            max_batch=100,
            max_chars=10_000,
        )
        ingest_messages(session, tenant_id, KEY, "s1", batch)
    args = ("conversation", "export", KEY, "--tenant", "acme", "-o")
    masked, whole = tmp_path / "masked.jsonl", tmp_path / "whole.jsonl"
    done = lcm(*args, str(masked), env=env)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in masked.read_text().splitlines()]
    assert len([line for line in lines if line["type"] == "message"]) == len(SAMPLES)
    assert leaks(lines) == []
    assert "[secret:aws_key#" in strings(lines)
    done = lcm(*args, str(whole), "--with-secrets", env=env)
    assert done.returncode == 0, done.stderr
    expected = sorted({v for s in SAMPLES for v in s.secrets})
    assert leaks([json.loads(line) for line in whole.read_text().splitlines()]) == expected
    listed = lcm("messages", KEY, "--tenant", "acme", "--json", env=env)  # `lcm messages` too
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)["messages"]
    assert len(rows) == len(SAMPLES)
    assert leaks(rows) == []
    assert "[secret:aws_key#" in strings(rows)


def test_console_pages_show_placeholders(
    client: TestClient, tenant: IssuedKey, compacted: int, db: Database
) -> None:
    page = client.get("/console/login")
    token = re.search(r'name="login_token" value="([^"]+)"', page.text)
    assert token is not None
    form = {"api_key": tenant.api_key, "login_token": token.group(1)}
    signed_in = client.post("/console/login", data=form, follow_redirects=False)
    assert signed_in.status_code == 303, signed_in.text
    shown: list[str] = []
    for start in range(1, 4 * len(SAMPLES) + 1, 20):
        r = client.get(f"/console/conversations/{compacted}/messages", params={"start": start})
        assert r.status_code == 200, r.text
        shown.append(html.unescape(r.text))
    with db.read_session() as s:
        summary_ids = list(
            s.scalars(select(Summary.id).where(Summary.conversation_id == compacted))
        )
    for summary_id in summary_ids:
        r = client.get(f"/console/summaries/{summary_id}")
        assert r.status_code == 200, r.text
        shown.append(html.unescape(r.text))
    assert leaks(shown) == []
    assert "[secret:aws_key#" in strings(shown)
    assert "Authorization: Bearer [secret:github_token#" in strings(shown)


def test_assemble_reads_spans_only_for_a_conversation_that_has_some(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: object) -> None:
        if "secret_spans" in statement:
            seen.append(statement)

    plain = [{"role": "user", "content": f"plain message {i}"} for i in range(30)]
    r = client.post(
        "/v1/conversations/plain/messages", headers=auth(tenant), json={"messages": plain}
    )
    assert r.status_code == 200, r.text
    ingest(client, tenant)
    event.listen(db.engine, "before_cursor_execute", record)
    try:
        for key in ("plain", "agent%3Avault"):
            seen.clear()
            body = {"token_budget": 1_000_000}
            r = client.post(f"/v1/conversations/{key}/assemble", headers=auth(tenant), json=body)
            assert r.status_code == 200, r.text
            if key == "plain":
                assert len(seen) == 1  # the probe: no span anywhere in the conversation
            else:
                assert len(seen) == 2  # the probe, then the spans of the messages shown
    finally:
        event.remove(db.engine, "before_cursor_execute", record)


@pytest.fixture
def files_client(db: Database, tmp_path: Path, sender: RecordingSender) -> Iterator[TestClient]:
    settings = db.settings.model_copy(update={"files_dir": tmp_path / "files"})
    app = create_app(
        settings, link=CeleryLink(), database=db, broker_ping=lambda: True, sender=sender
    )
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def test_a_large_files_grep_lines_pages_and_export_are_masked(
    files_client: TestClient, tenant: IssuedKey
) -> None:
    pem = next(s for s in SAMPLES if "PRIVATE KEY" in s.text)
    filler = "\n".join(f"LINE_{i}=value number {i}" for i in range(12_000))
    body = f"{filler}\n{pem.text}\nAWS_ACCESS_KEY_ID={SAMPLES[0].secrets[0]}\n"
    text = f'Here is my env\n<file name="prod.env">{body}</file>\nthat was it'
    r = files_client.post(
        f"{BASE}/messages",
        headers=auth(tenant),
        json={"messages": [{"role": "user", "content": text, "id": "m1"}]},
    )
    assert r.status_code == 200, r.text
    secrets = [*pem.secrets, SAMPLES[0].secrets[0]]
    pem_line = next(line for line in pem.secrets[0].splitlines() if len(line) > 20)
    body_json = {"pattern": f"AKIA|{pem_line[:12]}", "scope": "files", "session_key": KEY}
    r = files_client.post("/v1/grep", headers=auth(tenant), json=body_json)
    assert r.status_code == 200, r.text
    matches = r.json()["matches"]
    assert len(matches) >= 2  # the key's line and a line inside the PEM block
    shown = strings(matches)
    assert [s for s in secrets if s in shown] == []
    assert pem_line not in shown
    assert "[secret:aws_key#" in shown
    assert "[secret:private_key#" in shown
    file_id = matches[0]["id"]
    page = files_client.get(
        f"/v1/files/{file_id}", headers=auth(tenant), params={"offset": len(filler) - 10}
    )
    assert page.status_code == 200, page.text
    content = strings(page.json())
    assert [s for s in secrets if s in content] == []
    assert pem_line not in content
    assert "[secret:aws_key#" in content
    exported = files_client.get(f"{BASE}/export", headers=auth(tenant)).text
    lines = strings([json.loads(line) for line in exported.splitlines()])
    assert [s for s in secrets if s in lines] == []
    assert pem_line not in lines

"""``lcm_client`` against a real ``lcm serve``: every endpoint, sync and async; typed errors.

One scenario runs through ``LcmClient`` and again through ``AsyncLcmClient``
(each call awaited on one event loop); a recording transport under both
proves that together they reached every operation of ``/openapi.json``.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lcm.db.engine import Database
from lcm.tenants.service import IssuedKey
from lcm_client import (
    AsyncLcmClient,
    BadRequest,
    Conflict,
    LcmClient,
    NotFound,
    Unauthorized,
)
from lcm_client.models import (
    AssembleIn,
    BootstrapIn,
    CommitIn,
    CompactIn,
    ExpandIn,
    ExpandQueryIn,
    ForkIn,
    GrepIn,
    KeyIn,
    MessageIn,
    MessagesIn,
    SecretEraseIn,
    SecretScanIn,
    SessionResetIn,
    SummaryDescription,
    SummaryDissolveIn,
    SummaryRewriteIn,
    TurnIn,
)
from tests import servers

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts"
Call = Callable[..., Any]  # client method name, arguments -> its answer


@pytest.fixture
def served(db: Database, tmp_path: Path) -> Iterator[str]:
    """``lcm serve`` (API + in-process worker, offline summarizer) on the test database."""
    env = {
        "LCM_DATABASE_URL": db.settings.database_url,
        "LCM_HOME": str(tmp_path / "home"),
        "ANTHROPIC_API_KEY": "",
        "LCM_FRESH_TAIL_COUNT": "4",
        "LCM_LEAF_MIN_FANOUT": "4",
        "LCM_LEAF_CHUNK_TOKENS": "400",
        "LCM_LARGE_FILE_TOKEN_THRESHOLD": "500",
        "LCM_LOG_LEVEL": "WARNING",
    }
    handle = servers.start_serve(env, log=tmp_path / "serve.log")
    try:
        yield handle.base_url
    finally:
        handle.stop()


class Recording(httpx.HTTPTransport):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, str]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.seen.append((request.method, request.url.raw_path.decode().split("?")[0]))
        return super().handle_request(request)


class AsyncRecording(httpx.AsyncHTTPTransport):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, str]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.seen.append((request.method, request.url.raw_path.decode().split("?")[0]))
        return await super().handle_async_request(request)


def scenario(call: Call, key: str) -> None:
    """Every endpoint once or more, each answer checked for what it must say."""
    assert call("health").status == "ok"
    assert call("ready").status == "ready"
    texts = [f"deploy {i} of service web-{i} went fine " * 8 for i in range(24)]
    batch = MessagesIn(
        messages=[
            MessageIn(role="user" if i % 2 == 0 else "assistant", content=t, id=f"m{i}")
            for i, t in enumerate(texts)
        ],
        host_cursor="entry:24",
    )
    first = call("ingest", key, batch)
    assert (first.ingested, first.duplicates) == (24, 0)
    assert call("host_cursor", key).host_cursor == "entry:24"
    assert call("ingest", key, batch).duplicates == 24
    more = [MessageIn(role="user", content="and now the rollback plan", id="t1")]
    turn = call("turn", key, TurnIn(messages=more, token_budget=2000))
    assert turn.ingested == 1
    assert turn.compaction == "scheduled"
    commit = CommitIn(
        advancement_key="adv-1",
        messages=[MessageIn(role="assistant", content="rollback plan: revert web-3")],
        token_budget=2000,
    )
    assert call("commit", key, commit).status == "committed"
    assert call("commit", key, commit).status == "duplicate"
    compacted = call("compact", key, CompactIn(wait=30, token_budget=2000))
    assert compacted.status == "done"
    # The turn's own sweep may have run first (it was scheduled): compare with the turn.
    assert compacted.context_tokens_after < turn.context_tokens
    status = call("status", key, token_budget=2000)
    assert status.messages == 26
    assert status.summaries.get(0, 0) >= 2
    assembled = call("assemble", key, AssembleIn(token_budget=2000, system_prompt=True))
    assert assembled.summary_count >= 1
    assert assembled.system_prompt_addition

    hits = call("grep", GrepIn(pattern=r"web-1\d\b", scope="messages", session_key=key))
    assert [m.seq for m in hits.matches] == list(range(20, 10, -1))
    summaries = call("grep", GrepIn(pattern="deploy", scope="summaries", session_key=key))
    summary_id = str(summaries.matches[0].id)
    described = call("describe_summary", summary_id)
    assert described.id == summary_id
    assert described.source_messages.message_count >= 4
    assert isinstance(call("describe", summary_id), SummaryDescription)
    expanded = call("expand", ExpandIn(summary_ids=[summary_id]))
    assert expanded.messages
    assert expanded.messages[0].message["content"] in texts
    question = ExpandQueryIn(prompt="what about web-3?", query="web-3", session_key=key)
    answer = call("expand_query", question)
    assert answer.offline is True
    assert answer.cited_ids

    # Summary surgery (admin): a leased job per operation, polled by its id.
    rewritten = call("rewrite_summary", summary_id, SummaryRewriteIn(wait=30))
    assert (rewritten.status, rewritten.targets) == ("done", [summary_id])
    assert call("summary_operation", rewritten.operation_id).status == "done"
    assert call("describe_summary", summary_id).rewrites == 1
    leaf = summary_id if described.kind == "leaf" else call("describe", summary_id).parents[0]
    with pytest.raises(Conflict) as refused:
        call("dissolve_summary", leaf, SummaryDissolveIn())
    assert refused.value.code in ("leaf_summary", "not_in_context")

    big = "\n".join(f"line {i}: config value {i * 7}" for i in range(400))
    attached = MessageIn(role="user", content=f'<file name="conf.txt">{big}</file>', id="f1")
    call("ingest", key, MessagesIn(messages=[attached]))
    found = call("grep", GrepIn(pattern="config value 2793", scope="files", session_key=key))
    file_id = str(found.matches[0].id)
    page = call("describe_file", file_id, offset=10, limit=50)
    assert page.id == file_id
    assert page.content.text == big[10:60]
    assert call("describe", file_id).content.offset == 0

    transcript = (FIXTURES / "pi_v1.jsonl").read_text()
    booted = call("bootstrap", f"{key}-boot", BootstrapIn(transcript_jsonl=transcript))
    assert booted.imported > 0
    assert booted.anchor == "empty"
    assert call("bootstrap", f"{key}-boot", BootstrapIn(transcript_jsonl=transcript)).imported == 0

    child = call("fork", f"{key}-child", ForkIn(parent_session_key=key))
    assert child.created
    assert child.summaries_shared >= 1
    assert call("end_fork", f"{key}-child").status == "ended"
    call("fork", f"{key}-child2", ForkIn(parent_session_key=key, mode="isolated"))
    assert call("rollback_fork", f"{key}-child2").status == "rolled_back"

    # Data: list, export, import beside the original, erase.
    page = call("list_conversations", prefix=key, limit=2)
    assert page.conversations
    assert all(c.session_key.startswith(key) for c in page.conversations)
    listed = {c.session_key for c in page.conversations}
    while page.next_cursor:
        page = call("list_conversations", prefix=key, limit=2, cursor=page.next_cursor)
        listed |= {c.session_key for c in page.conversations}
    assert {key, f"{key}-boot", f"{key}-child"} <= listed
    exported = call("export", f"{key}-boot")
    assert exported.count("\n") >= 2
    copied = call("import_conversation", f"{key}-copy", exported)
    assert copied.messages == booted.imported
    assert call("erase", f"{key}-copy") is None
    with pytest.raises(NotFound):
        call("status", f"{key}-copy")

    # Tenant administration: usage, keys.
    assert call("usage").since is not None
    issued = call("create_key", KeyIn(name=f"{key}-reader", scopes=["read"]))
    assert issued.api_key
    assert issued.scopes == ["read"]
    assert issued.id in {k.id for k in call("keys").keys}
    rotated = call("rotate_key", issued.id)
    assert rotated.api_key != issued.api_key
    assert call("revoke_key", rotated.id).revoked_at is not None
    # Secrets (admin): a scan the in-process worker runs, followed by its id; the report.
    scanned = call("start_secret_scan", SecretScanIn(session_key=key, rescan_all=True))
    # A second start while the first runs is refused (secret_scan_running:
    # tests/e2e/test_secrets_ops_http.py holds that with a worker that never
    # runs it). Here the in-process worker may finish the first scan before
    # the second call arrives, and then the second simply starts another.
    scan_refused: list[str] = []
    try:
        call("start_secret_scan", SecretScanIn(session_key=key))
    except Conflict as busy:
        scan_refused.append(busy.code)
    assert scan_refused in ([], ["secret_scan_running"])
    waited = time.monotonic() + 60
    while scanned.status in ("pending", "running") and time.monotonic() < waited:
        time.sleep(0.2)
        scanned = call("secret_scan", scanned.id)
    assert scanned.status == "done", scanned
    assert scanned.messages_done >= 1
    assert isinstance(call("secrets_report").conversations, list)
    assert call("secret_reads", limit=5).reads == []  # no key read originals yet
    erased = call("erase_secrets", SecretEraseIn(value="not-a-stored-secret-value"))
    assert erased.spans == 0
    assert erased.conversation_ids == []
    with pytest.raises(BadRequest) as unconfirmed:
        call("erase_tenant", "not-the-tenant-name")
    assert unconfirmed.value.code == "confirm_required"

    pruned = call("session_reset", key, SessionResetIn(mode="new", retain_depth=0))
    assert pruned.conversation_id == status.conversation_id
    assert pruned.context_items_removed
    fresh = call("session_reset", key, SessionResetIn(mode="reset", session_id="after-reset"))
    assert fresh.archived_conversation_id == status.conversation_id

    changed = call("update_settings", {"fresh_tail_count": 9})
    assert changed.overrides == {"fresh_tail_count": 9}
    assert call("settings").effective["fresh_tail_count"] == 9
    assert call("update_settings", {"fresh_tail_count": None}).overrides == {}
    # Offline (no API key) summaries are extractive by design: nothing to repair.
    assert call("doctor").degraded == 0
    assert call("doctor_apply").status == "none"

    # Typed errors carry the server's code.
    with pytest.raises(BadRequest) as bad:
        call("ingest", key, MessagesIn(messages=[MessageIn(role="user", content="a\x00b")]))
    assert bad.value.status == 400
    assert bad.value.code == "invalid_text"
    with pytest.raises(NotFound) as missing:
        call("describe_summary", "sum_0000000000000000")
    assert missing.value.code == "not_found"
    with pytest.raises(NotFound):
        call("status", f"{key}-never-seen")


def operations(base_url: str) -> set[tuple[str, str]]:
    document = httpx.get(f"{base_url}/openapi.json").json()
    return {
        (method.upper(), path)
        for path, item in document["paths"].items()
        for method in item
        if path.startswith("/v1/") or path in ("/healthz", "/readyz")
    }


def reached(seen: list[tuple[str, str]], ops: set[tuple[str, str]]) -> set[tuple[str, str]]:
    def template(path: str) -> re.Pattern[str]:
        return re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", path) + "$")

    patterns = {op: template(op[1]) for op in ops}
    return {
        op for op in ops for method, path in seen if op[0] == method and patterns[op].match(path)
    }


def test_every_endpoint_sync_and_async(served: str, tenant: IssuedKey) -> None:
    ops = operations(served)
    sync_transport = Recording()
    with LcmClient(served, tenant.api_key, transport=sync_transport) as client:

        def sync_call(name: str, *args: Any, **kwargs: Any) -> Any:
            return getattr(client, name)(*args, **kwargs)

        scenario(sync_call, "sync/key with spaces?")

    loop = asyncio.new_event_loop()
    async_transport = AsyncRecording()
    aclient = AsyncLcmClient(served, tenant.api_key, transport=async_transport)
    try:

        def async_call(name: str, *args: Any, **kwargs: Any) -> Any:
            return loop.run_until_complete(getattr(aclient, name)(*args, **kwargs))

        scenario(async_call, "async/key")
    finally:
        loop.run_until_complete(aclient.aclose())
        loop.close()
    assert reached(sync_transport.seen, ops) == ops
    assert reached(async_transport.seen, ops) == ops


def test_unknown_key_is_unauthorized_with_its_code(served: str) -> None:
    with LcmClient(served, "lcm_not-a-key") as client, pytest.raises(Unauthorized) as exc:
        client.settings()
    assert exc.value.status == 401
    assert exc.value.code


def test_importing_the_client_loads_neither_fastapi_nor_sqlalchemy() -> None:
    probe = (
        "import sys, json, lcm_client; "
        "print(json.dumps(sorted(m for m in ('fastapi', 'sqlalchemy', 'celery', 'starlette') "
        "if m in sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []

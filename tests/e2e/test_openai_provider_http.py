"""An OpenAI-compatible provider chosen per tenant, over HTTP, end to end.

Postgres with a real Celery worker process, and SQLite with ``lcm serve``
(its in-process worker; streaming on). The deployment configures only the
OpenAI-compatible endpoint (the fake chat-completions server); the tenant
chooses ``summary_provider: openai``, a leaf model and a condensed model by
depth, a large-file model, an expand-query model and thinking. Compaction,
the large file's summary and expand-query each complete through the fake
server, whose received requests are checked; usage shows them apart.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from fastapi.testclient import TestClient
from sqlalchemy import select

from api.app import create_app
from lcm.db.engine import Database
from lcm.db.models import LargeFile, LlmUsage, Summary
from tests import servers
from tests.conftest import auth, new_tenant, settings_for
from tests.fakes import Behaviour, FakeOpenAiServer
from tests.fakes.anthropic_script import THOUGHT
from tests.integration.test_compaction_workers import wait_until
from workers.link import CeleryLink
from workers.sender import CelerySender

KEY = "agent:main:openai"
TENANT_SETTINGS: dict[str, Any] = {
    "summary_provider": "openai",
    "summary_model": "leaf-model",
    "summary_model_rules": [{"depth_min": 1, "model": "condensed-model"}],
    "large_file_summary_model": "file-model",
    "expansion_model": "ask-model",
    "enable_summary_thinking": True,
    "summary_reasoning_effort": "medium",
    "fresh_tail_count": 4,
    "leaf_min_fanout": 4,
    "leaf_chunk_tokens": 400,
    "condensed_min_fanout": 2,
    "condensed_min_fanout_hard": 2,
    "large_file_token_threshold": 2_000,
}
ENV = {"LCM_LLM_MAX_RETRIES": "0", "LCM_OPENAI_API_KEY": "sk-local"}


@dataclass
class Deployment:
    """One running deployment: its HTTP client, database, the tenant's headers, the fake."""

    http: httpx.Client | TestClient
    database: Database
    headers: dict[str, str]
    fake: FakeOpenAiServer
    logs: Callable[[], str]
    streaming: bool


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAiServer]:
    with FakeOpenAiServer() as server:
        yield server


@pytest.fixture
def postgres(
    fake: FakeOpenAiServer,
    worker_env: dict[str, str],
    celery_app: Any,
    redis_server: servers.RedisHandle,
    pg_db: Database,
    tmp_path: Path,
) -> Iterator[Deployment]:
    redis.Redis.from_url(redis_server.url).flushall()  # nothing left from earlier tests
    env = {**worker_env, **ENV, "LCM_OPENAI_BASE_URL": fake.base_url}
    env.pop("ANTHROPIC_API_KEY", None)
    worker = servers.start_celery_worker(env, hostname="openai", log=tmp_path / "worker.log")
    # The API stores the large file where the worker reads it.
    settings = pg_db.settings.model_copy(update={"files_dir": Path(worker_env["LCM_FILES_DIR"])})
    app = create_app(
        settings,
        link=CeleryLink(),
        database=pg_db,
        broker_ping=lambda: True,
        sender=CelerySender(),
    )
    tenant = new_tenant(pg_db)
    try:
        with TestClient(app) as client:
            yield Deployment(
                client,
                pg_db,
                auth(tenant),
                fake,
                lambda: (tmp_path / "worker.log").read_text()[-3000:],
                streaming=False,
            )
    finally:
        servers.stop_process(worker)


@pytest.fixture
def sqlite(fake: FakeOpenAiServer, tmp_path: Path) -> Iterator[Deployment]:
    home = tmp_path / "home"
    url, key = servers.embedded_home(home, "acme")
    env = {
        **ENV,
        "LCM_HOME": str(home),
        "LCM_OPENAI_BASE_URL": fake.base_url,
        "LCM_OPENAI_STREAM": "true",
    }
    serve = servers.start_serve(env, log=home / "serve.log")
    database = Database(settings_for(url))
    try:
        with httpx.Client(base_url=serve.base_url, timeout=60) as client:
            yield Deployment(
                client,
                database,
                {"Authorization": f"Bearer {key}"},
                fake,
                lambda: (home / "serve.log").read_text()[-3000:],
                streaming=True,
            )
    finally:
        serve.stop()
        database.dispose()


@pytest.fixture(params=["postgres", "sqlite"])
def deployment(request: pytest.FixtureRequest) -> Deployment:
    return request.getfixturevalue(request.param)


def turn(d: Deployment, start: int, n: int, extra: str = "") -> None:
    messages = [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "id": f"m-{i}",
            "content": f"turn {i}: we changed config/app.yaml and reran the tests " * 6,
        }
        for i in range(start, start + n)
    ]
    if extra:
        messages.append({"role": "user", "id": f"m-file-{start}", "content": extra})
    r = d.http.post(
        f"/v1/conversations/{KEY}/turns",
        headers=d.headers,
        json={"messages": messages, "token_budget": 1_500},
    )
    assert r.status_code == 200, r.text


def summaries(d: Deployment) -> list[Summary]:
    with d.database.session() as s:
        return list(s.scalars(select(Summary)))


def test_compaction_files_and_expand_query_through_the_chat_completions_server(
    deployment: Deployment,
) -> None:
    d, fake = deployment, deployment.fake
    fake.set_default("ok")
    seen = len(fake.requests)
    r = d.http.patch("/v1/tenant/settings", json=TENANT_SETTINGS, headers=d.headers)
    assert r.status_code == 200, r.text

    prose = "# Launch plan\n" + "We launch in March after the security review. " * 400
    turn(d, 0, 24, extra=f'Read this:\n<file name="plan.md">{prose}</file>')
    for start in (24, 48):
        turn(d, start, 24)
    wait_until(
        lambda: {s.depth > 0 for s in summaries(d)} == {False, True},
        90,
        "leaf and condensed summaries",
        d.logs,
    )
    wait_until(lambda: _file_summary(d) is not None, 60, "the file's summary", d.logs)
    file_summary = _file_summary(d)

    written = summaries(d)
    assert all(s.model == ("condensed-model" if s.depth else "leaf-model") for s in written)
    assert all(s.degraded is None and THOUGHT not in s.content for s in written)
    assert file_summary is not None
    assert THOUGHT not in file_summary
    assert file_summary.startswith("Summary of")  # the model's, not the structural fallback

    sent = fake.requests[seen:]
    by_model = {r.model for r in sent}
    assert {"leaf-model", "condensed-model", "file-model"} <= by_model
    for request in sent:
        assert [m["role"] for m in request.messages] == ["system", "user"]
        assert request.body["reasoning_effort"] == "medium"  # thinking asked of summaries
        assert "temperature" not in request.body
        assert request.body.get("stream", False) is d.streaming
        assert request.headers["authorization"] == "Bearer sk-local"
    file_request = next(r for r in sent if r.model == "file-model")
    assert "plan.md" in file_request.messages[0]["content"]  # the file's instructions
    assert "security review" in file_request.messages[1]["content"]

    _expand_query(d)
    _usage_by_purpose(d)

    # A provider this deployment has no key or endpoint for: a clear 503, no call.
    r = d.http.patch(
        "/v1/tenant/settings", json={"expansion_provider": "anthropic"}, headers=d.headers
    )
    assert r.status_code == 200, r.text
    asks = len(fake.requests_for("ask-model"))
    body = {"prompt": "What changed?", "query": "config", "session_key": KEY}
    r = d.http.post("/v1/expand-query", json=body, headers=d.headers)
    assert r.status_code == 503, r.text
    assert r.json()["error"]["code"] == "provider_not_configured"
    assert len(fake.requests_for("ask-model")) == asks  # (compaction may still be running)


def _file_summary(d: Deployment) -> str | None:
    with d.database.session() as s:
        return s.scalar(select(LargeFile.exploration_summary))


def _expand_query(d: Deployment) -> None:
    fake = d.fake
    fake.script(
        [
            Behaviour.tool_use("grep", {"pattern": "config/app.yaml", "mode": "regex"}),
            Behaviour.reply("They changed config/app.yaml and reran the tests."),
        ],
        model="ask-model",
    )
    seen = len(fake.requests_for("ask-model"))
    body = {"prompt": "What changed?", "query": "config", "session_key": KEY}
    r = d.http.post("/v1/expand-query", json=body, headers=d.headers)
    assert r.status_code == 200, r.text + d.logs()
    answer = r.json()
    assert answer["offline"] is False
    assert answer["model"] == "ask-model"
    assert answer["turns"] == 2
    assert answer["answer"] == "They changed config/app.yaml and reran the tests."
    first, second = fake.requests_for("ask-model")[seen:]
    tools = first.body["tools"]
    assert [t["type"] for t in tools] == ["function"] * 3
    assert [t["function"]["name"] for t in tools] == ["grep", "describe", "expand"]
    assert "pattern" in tools[0]["function"]["parameters"]["properties"]
    assert first.body["tool_choice"] == "auto"
    assert [m["role"] for m in first.messages] == ["system", "user"]
    assert "What changed?" in first.messages[1]["content"]
    assert "reasoning_effort" not in first.body  # thinking is for summaries
    roles = [m["role"] for m in second.messages]
    assert roles == ["system", "user", "assistant", "tool"]
    call = second.messages[2]["tool_calls"][0]
    assert call["function"]["name"] == "grep"
    assert second.messages[3]["tool_call_id"] == call["id"]
    assert "config/app.yaml" in second.messages[3]["content"]  # the grep's matches


def _usage_by_purpose(d: Deployment) -> None:
    r = d.http.get("/v1/tenant/usage", headers=d.headers)
    assert r.status_code == 200, r.text
    lines = {(x["purpose"], x["provider"], x["model"]): x for x in r.json()["by_purpose"]}
    assert set(lines) == {
        ("summary", "openai", "leaf-model"),
        ("summary", "openai", "condensed-model"),
        ("file", "openai", "file-model"),
        ("expansion", "openai", "ask-model"),
    }
    assert lines[("expansion", "openai", "ask-model")]["calls"] == 2
    assert all(x["output_tokens"] > 0 for x in lines.values())
    with d.database.session() as s:
        reasoning = s.scalars(
            select(LlmUsage.output_tokens).where(LlmUsage.model == "leaf-model")
        ).all()
    # Each summary call's output includes the fake's 40 reasoning tokens.
    assert reasoning
    assert min(reasoning) > 40

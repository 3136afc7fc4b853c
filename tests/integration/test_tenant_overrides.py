"""A tenant's model, fallbacks, truncation, expand cap and instructions reach the LLM request.

The summarizer and the expand-query client are built once per process; what a
tenant overrides travels with each call. Each test drives the real path (the
turn endpoint in inline mode, the expand-query loop under a grant) against the
fake Messages API server and reads what the server received.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy import select

from lcm.content import IncomingMessage
from lcm.db.engine import Database
from lcm.db.models import Summary
from lcm.errors import SummarizerError
from lcm.ingest.service import ingest_messages, prepare_batch
from lcm.retrieval.answers import ExpandQueryRequest
from lcm.retrieval.expansion import execute_expand_query, start_expand_query
from lcm.retrieval.scope import ScopeSelector
from lcm.services import Services
from lcm.settings import Settings
from lcm.summarize.llm import LlmClients
from lcm.summarize.policy import SummaryPolicy
from lcm.tenants.service import IssuedKey, update_overrides
from lcm.tokens import estimate_tokens
from tests.conftest import RecordingSender
from tests.fakes import Behaviour, FakeAnthropicServer
from tests.integration.retrieval_data import compact, ingest
from tests.integration.service_loop import SMALL, turn
from tests.integration.test_compaction_engine import assert_lossless

PROCESS_MODEL = "process-model"


@pytest.fixture
def llm() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as server:
        yield server


def with_llm(db: Database, llm: FakeAnthropicServer) -> Settings:
    """The deployment's settings: an API key, the fake server, the process model."""
    return db.settings.model_copy(
        update={
            "anthropic_api_key": SecretStr("sk-test"),
            "anthropic_base_url": llm.base_url,
            "llm_max_retries": 0,
            "summary_model": PROCESS_MODEL,
        }
    )


@pytest.fixture
def llm_client(db: Database, llm: FakeAnthropicServer) -> Iterator[TestClient]:
    from api.app import create_app
    from workers.link import CeleryLink

    settings = with_llm(db, llm)
    app = create_app(
        settings, link=CeleryLink(), database=db, broker_ping=lambda: True, sender=RecordingSender()
    )
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def override(db: Database, tenant: IssuedKey, **values: object) -> None:
    with db.transaction() as s:
        update_overrides(s, tenant.tenant_id, {"compaction_mode": "inline", **SMALL, **values})


def test_summary_model_and_custom_instructions_reach_the_request(
    db: Database, tenant: IssuedKey, llm: FakeAnthropicServer, llm_client: TestClient
) -> None:
    override(db, tenant, summary_model="tenant-model", custom_instructions="Write like a pirate.")
    out = turn(llm_client, tenant, 40)
    assert out["compaction"] == "ran"
    assert llm.requests, "no LLM call was made"
    assert {r.model for r in llm.requests} == {"tenant-model"}
    assert all("Write like a pirate." in str(r.system) + r.user_text for r in llm.requests)
    with db.session() as s:
        assert set(s.scalars(select(Summary.model))) == {"tenant-model"}
    assert_lossless(db, out["conversation_id"])


def test_fallback_models_are_the_tenants(
    db: Database, tenant: IssuedKey, llm: FakeAnthropicServer, llm_client: TestClient
) -> None:
    override(db, tenant, summary_model="tenant-a", summary_fallback_models=["tenant-b"])
    llm.set_default("500", model="tenant-a")
    out = turn(llm_client, tenant, 40)
    assert out["compaction"] == "ran"
    asked = [r.model for r in llm.requests]
    assert asked[:2] == ["tenant-a", "tenant-b"]
    assert PROCESS_MODEL not in asked
    with db.session() as s:
        assert set(s.scalars(select(Summary.model))) == {"tenant-b"}


def test_truncation_tokens_is_the_tenants(
    db: Database, tenant: IssuedKey, llm: FakeAnthropicServer, llm_client: TestClient
) -> None:
    override(db, tenant, truncation_tokens=40)
    llm.set_default("oversized")  # every answer is useless: each pass ends in truncation
    out = turn(llm_client, tenant, 40)
    assert out["compaction"] == "ran"
    with db.session() as s:
        truncated = s.scalars(select(Summary).where(Summary.escalation == "fallback")).all()
    assert truncated
    # ~40 tokens of source plus the marker and footer, far below the default 512.
    assert all(estimate_tokens(s.content) < 200 for s in truncated)


def test_expand_query_uses_the_tenants_model(
    db: Database, tenant: IssuedKey, llm: FakeAnthropicServer
) -> None:
    settings = with_llm(db, llm)
    with db.transaction() as s:
        update_overrides(s, tenant.tenant_id, {"summary_model": "tenant-model"})
    client_llm = LlmClients.from_settings(settings)  # the process's: no tenant in it
    assert settings.summary_model == PROCESS_MODEL
    with db.transaction() as s:
        incoming = [IncomingMessage("user", "the ops-7 backup went to cold storage")]
        batch = prepare_batch(incoming, max_batch=10, max_chars=1_000)
        ingest_messages(s, tenant.tenant_id, "k", None, batch)
    request = ExpandQueryRequest("Where did the backup go?", "ops-7")
    with db.transaction() as s:
        grant = start_expand_query(s, tenant.tenant_id, ScopeSelector("k"), request, settings)
    answer = execute_expand_query(
        db.transaction, grant.id, tenant.tenant_id, request, settings, client_llm
    )
    assert answer.model == "tenant-model"
    assert [r.model for r in llm.requests] == ["tenant-model"]


def test_expand_query_reads_under_the_tenants_expand_cap(
    db: Database, tenant: IssuedKey, llm: FakeAnthropicServer
) -> None:
    settings = with_llm(db, llm)
    with db.transaction() as s:
        update_overrides(s, tenant.tenant_id, {"max_expand_tokens": 60})
    words = [" ".join(f"w{n}-{i}" for i in range(150)) for n in range(12)]
    cid = ingest(db, tenant.tenant_id, "k", [f"ops-7 backup notes {w}" for w in words])
    compact(db, tenant.tenant_id, cid)
    with db.session() as s:
        leaf = s.scalars(select(Summary.id).where(Summary.depth == 0)).first()
    llm.script(
        [
            Behaviour.tool_use("expand", {"summary_ids": [leaf], "token_cap": 50_000}),
            Behaviour.reply("Cold storage."),
        ]
    )
    request = ExpandQueryRequest("Where did the backup go?", "ops-7")
    with db.transaction() as s:
        grant = start_expand_query(s, tenant.tenant_id, ScopeSelector("k"), request, settings)
    process_llm = LlmClients.from_settings(settings)
    execute_expand_query(db.transaction, grant.id, tenant.tenant_id, request, settings, process_llm)
    tool_result = llm.requests[1].messages[-1]["content"][0]["content"]
    # The model asked for 50,000 tokens; the tenant's cap of 60 is what it got
    # (the deployment's 4,000 would have returned every message under the leaf).
    assert "omitted" in tool_result
    assert estimate_tokens(tool_result) < 400


def test_breakers_are_per_model_and_shared_by_summaries_and_expand_query(
    db: Database, tenant: IssuedKey, llm: FakeAnthropicServer
) -> None:
    settings = with_llm(db, llm).model_copy(update={"llm_breaker_failures": 2})
    services = Services.build(settings, database=db)
    llm.set_default("500", model="down-model")
    for _ in range(2):  # two failures open down-model's breaker
        services.summarizer.summarize(
            "some text to summarize " * 50,
            depth=0,
            target_tokens=100,
            policy=SummaryPolicy.for_models(["down-model"]),
        )
    assert len(llm.requests_for("down-model")) == 2
    # A summary falling back from down-model goes straight to the fallback.
    result = services.summarizer.summarize(
        "other text to summarize " * 50,
        depth=0,
        target_tokens=100,
        policy=SummaryPolicy.for_models(["down-model", "up-model"]),
    )
    assert result.model == "up-model"
    assert len(llm.requests_for("down-model")) == 2
    # Expand-query with the same model shares the breaker: it fails fast, unsent.
    with db.transaction() as s:
        update_overrides(s, tenant.tenant_id, {"summary_model": "down-model"})
        batch = prepare_batch([IncomingMessage("user", "ops-7")], max_batch=1, max_chars=100)
        ingest_messages(s, tenant.tenant_id, "k", None, batch)
    request = ExpandQueryRequest("Where?", "ops-7")
    with db.transaction() as s:
        grant = start_expand_query(s, tenant.tenant_id, ScopeSelector("k"), request, settings)
    with pytest.raises(SummarizerError):
        execute_expand_query(
            db.transaction, grant.id, tenant.tenant_id, request, settings, services.llm
        )
    assert len(llm.requests_for("down-model")) == 2
    assert services.llm is not None
    assert services.llm.breakers.states() == {"down-model": "open", "up-model": "closed"}

"""The OpenAPI document is the contract, checked by Schemathesis against the running app.

Schemathesis generates requests from ``/openapi.json`` (valid and invalid
ones) and checks every answer: no server error, a status the document lists
for that operation, a body that matches the documented schema and media type.
It runs against a real ``lcm serve`` (API and in-process worker) over HTTP, on
SQLite and on Postgres, with a tenant key and a conversation that exists, so
both the happy paths and the 4xx paths are hit.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from lcm.db.engine import Database
from lcm.tenants.keys import SCOPES, IssuedKey
from tests import servers
from tests.conftest import RecordingSender, auth

MAX_EXAMPLES = 25
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    response_schema_conformance,
    content_type_conformance,
]


@pytest.fixture
def contract_app(db: Database) -> FastAPI:
    from api.app import create_app
    from workers.link import CeleryLink

    return create_app(
        db.settings,
        link=CeleryLink(),
        database=db,
        broker_ping=lambda: True,
        sender=RecordingSender(),
    )


@pytest.fixture
def served(db: Database, tenant: IssuedKey, tmp_path: Path) -> Iterator[str]:
    """``lcm serve`` (API + in-process worker) on the test database; its base URL."""
    env = {
        "LCM_DATABASE_URL": db.settings.database_url,
        "LCM_HOME": str(tmp_path / "home"),
        # Waiting endpoints answer quickly; the fuzzer asks for long waits.
        "LCM_COMPACT_WAIT_MAX_SECONDS": "0.2",
        "LCM_EXPAND_QUERY_TIMEOUT_SECONDS": "10",
        "LCM_LOG_LEVEL": "WARNING",
    }
    handle = servers.start_serve(env, log=tmp_path / "serve.log")
    try:
        turn = {
            "messages": [{"role": "user", "content": f"marker {i}"} for i in range(12)],
            "token_budget": 1000,
        }
        base = handle.base_url
        answer = httpx.post(f"{base}/v1/conversations/k/turns", headers=auth(tenant), json=turn)
        assert answer.status_code == 200, answer.text
        yield base
    finally:
        handle.stop()


def run_operation(
    operation: schemathesis.APIOperation,
    mode: GenerationMode,
    base_url: str,
    key: IssuedKey,
    cases: Counter[str],
) -> list[str]:
    """Run the generated cases of one operation; the failures as text."""
    failures: list[str] = []

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        database=None,
    )
    def run(case: schemathesis.Case) -> None:
        cases[mode.value] += 1
        try:
            case.call_and_validate(base_url=base_url, headers=auth(key), checks=CHECKS)
        except (Exception, BaseExceptionGroup) as exc:  # collect all, not just the first
            failures.append(f"{operation.label} [{mode.value}]: {exc}"[:2000])

    try:
        run()
    except Unsatisfiable:
        # No parameters and no body: nothing to make invalid in negative mode.
        assert mode is GenerationMode.NEGATIVE, operation.label
    return failures


def test_every_operation_keeps_the_contract(served: str, tenant: IssuedKey) -> None:
    schema = schemathesis.openapi.from_url(f"{served}/openapi.json")
    cases: Counter[str] = Counter()
    failures: list[str] = []
    operations = [cast(Any, result).ok() for result in schema.get_all_operations()]
    assert len(operations) >= 15
    # Revoking or rotating a key may hit the key the run uses (any key id can
    # be generated): those operations run last, each with a key of its own.
    revoking = [op for op in operations if op.path.endswith(("/revoke", "/rotate"))]
    assert len(revoking) == 2
    spare_keys = [spare_key(served, tenant) for _ in revoking]
    runs = [(op, tenant) for op in operations if op not in revoking]
    for operation, key in [*runs, *zip(revoking, spare_keys, strict=True)]:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            failures += run_operation(operation, mode, served, key, cases)
    print(f"schemathesis: {len(operations)} operations, cases {dict(cases)}")
    assert not failures, "\n\n".join(failures[:10])


def spare_key(base_url: str, tenant: IssuedKey) -> IssuedKey:
    made = httpx.post(f"{base_url}/v1/tenant/keys", headers=auth(tenant), json={"name": "spare"})
    assert made.status_code == 201, made.text
    return dataclasses.replace(tenant, api_key=made.json()["api_key"])


def test_openapi_documents_auth_errors_and_one_validation_status(contract_app: FastAPI) -> None:
    document = contract_app.openapi()
    assert document["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            statuses = set(operation["responses"])
            assert "422" not in statuses, (method, path)
            if path.startswith("/v1/"):
                [requirement] = operation["security"]
                assert list(requirement) == ["bearer"], (method, path)
                assert len(requirement["bearer"]) == 1
                assert requirement["bearer"][0] in SCOPES
                assert {"400", "401", "403", "404", "413", "503"} <= statuses, (method, path)
                error = operation["responses"]["400"]["content"]["application/json"]["schema"]
                assert error == {"$ref": "#/components/schemas/ErrorOut"}
                # Success is 200 or 201 with a typed body, 202 with one for a job
                # that runs after the answer (a secret scan), 204 for erases, or a
                # JSONL stream (export).
                assert statuses & {"200", "201", "202", "204"}, (method, path)
                success = next((s for s in ("201", "202") if s in statuses), "200")
                if success not in statuses:
                    continue
                content = operation["responses"][success]["content"]
                if list(content) == ["application/x-ndjson"]:
                    continue
                ok = content["application/json"]["schema"]
                assert ok.get("$ref") or ok.get("type") == "object", (method, path, ok)
    metrics = document["paths"]["/metrics"]["get"]["responses"]["200"]["content"]
    assert list(metrics) == ["text/plain"]

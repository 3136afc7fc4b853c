"""Operator controls of secret detection: custom patterns, the allow-list, unmasked surfaces.

Each is a tenant setting written through ``PATCH /v1/tenant/settings``,
validated whole (a bad one is a 400 JSON error and changes nothing) and
applied to the next ingest without a restart.
"""

from __future__ import annotations

import html
import re
import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from lcm.secret_rules import SecretPattern, allow_list_hash
from lcm.settings import Settings
from lcm.tenants.service import IssuedKey
from tests.conftest import auth

BASE = "/v1/conversations/agent%3Aops"
ACME = "acme_live_" + "Q7w2" * 6
ALLOWED = "AKIAIOSFODNN7EXAMPLE"  # the documentation's example key
OTHER_AWS = "AKIA" + "Z3QX" * 4


def patch(client: TestClient, tenant: IssuedKey, body: dict[str, Any]) -> Any:
    return client.patch("/v1/tenant/settings", headers=auth(tenant), json=body)


def grep(client: TestClient, tenant: IssuedKey, pattern: str) -> list[dict[str, Any]]:
    body = {"pattern": pattern, "session_key": "agent:ops", "limit": 50}
    r = client.post("/v1/grep", headers=auth(tenant), json=body)
    assert r.status_code == 200, r.text
    return list(r.json()["matches"])


def ingest(client: TestClient, tenant: IssuedKey, text: str, message_id: str) -> None:
    body = {"messages": [{"role": "user", "id": message_id, "content": text}]}
    r = client.post(f"{BASE}/messages", headers=auth(tenant), json=body)
    assert r.status_code == 200, r.text


@pytest.mark.parametrize(
    "body",
    [
        {"secrets_custom_patterns": [{"kind": "acme", "pattern": r"(a)\1"}]},  # backreference
        {"secrets_custom_patterns": [{"kind": "acme", "pattern": r"(?=x)y"}]},  # lookahead
        {"secrets_custom_patterns": [{"kind": "acme", "pattern": r"x*"}]},  # empty match
        {"secrets_custom_patterns": [{"kind": "acme", "pattern": r"(a)(b)"}]},  # two groups
        {"secrets_custom_patterns": [{"kind": "Acme Key", "pattern": r"acme_\w+"}]},
        {"secrets_custom_patterns": [{"kind": "acme", "pattern": "a" * 501}]},
        {"secrets_custom_patterns": [{"kind": f"k{i}", "pattern": f"k{i}_x"} for i in range(51)]},
        {"secrets_custom_patterns": [{"kind": "acme", "pattern": "acme_", "extra": 1}]},
        {"secrets_allow_list": [""]},
        {"secrets_unmasked_surfaces": ["logs"]},
    ],
)
def test_bad_secret_settings_are_refused_whole(
    client: TestClient, tenant: IssuedKey, body: dict[str, Any]
) -> None:
    assert patch(client, tenant, {"secrets_allow_list": ["kept"]}).status_code == 200
    r = patch(client, tenant, {**body, "summary_model": "other-model"})
    assert r.status_code == 400, r.text
    assert set(r.json()["error"]) >= {"code", "message"}
    overrides = client.get("/v1/tenant/settings", headers=auth(tenant)).json()["overrides"]
    assert overrides == {"secrets_allow_list": [allow_list_hash("kept")]}


def test_custom_patterns_and_allow_list_apply_to_the_next_ingest(
    client: TestClient, tenant: IssuedKey
) -> None:
    line = f"deploy with ACME_KEY {ACME} and aws {ALLOWED} then {OTHER_AWS}"
    ingest(client, tenant, line, "before")
    before = grep(client, tenant, "deploy with")[0]["snippet"]
    assert ACME in before
    assert ALLOWED not in before

    r = patch(
        client,
        tenant,
        {
            "secrets_custom_patterns": [{"kind": "acme_key", "pattern": r"acme_live_\w{24}"}],
            "secrets_allow_list": [ALLOWED],
        },
    )
    assert r.status_code == 200, r.text
    shown = client.get("/v1/tenant/settings", headers=auth(tenant)).json()
    assert ALLOWED not in str(shown)  # read back as its hash only
    assert shown["overrides"]["secrets_allow_list"] == [allow_list_hash(ALLOWED)]
    assert shown["effective"]["secrets_allow_list"] == [allow_list_hash(ALLOWED)]

    ingest(client, tenant, line.replace("deploy", "release"), "after")
    after = grep(client, tenant, "release with")[0]["snippet"]
    assert ACME not in after
    assert "[secret:acme_key#" in after
    assert ALLOWED in after  # allow-listed: never masked
    assert OTHER_AWS not in after
    assert "[secret:aws_key#" in after
    # A second patch replaces the list whole; hashes given back stay as they are.
    again = patch(client, tenant, {"secrets_allow_list": [allow_list_hash(ALLOWED), "x-test"]})
    assert again.json()["overrides"]["secrets_allow_list"] == [
        allow_list_hash(ALLOWED),
        allow_list_hash("x-test"),
    ]


def test_unmasked_surfaces_show_the_stored_text_there_only(
    client: TestClient, tenant: IssuedKey
) -> None:
    ingest(client, tenant, f"the key is {OTHER_AWS} ok", "m1")
    assert OTHER_AWS not in grep(client, tenant, "the key")[0]["snippet"]
    assert patch(client, tenant, {"secrets_unmasked_surfaces": ["grep"]}).status_code == 200
    assert OTHER_AWS in grep(client, tenant, "the key")[0]["snippet"]
    assembled = client.post(f"{BASE}/assemble", headers=auth(tenant), json={"token_budget": 4000})
    assert assembled.status_code == 200, assembled.text
    assert OTHER_AWS not in assembled.text
    assert "[secret:aws_key#" in assembled.text
    # The older setting and the surface list say the same for assemble.
    assert patch(client, tenant, {"secrets_unmasked_surfaces": ["assemble"]}).status_code == 200
    assembled = client.post(f"{BASE}/assemble", headers=auth(tenant), json={"token_budget": 4000})
    assert OTHER_AWS in assembled.text
    assert OTHER_AWS not in grep(client, tenant, "the key")[0]["snippet"]
    exported = client.get(f"{BASE}/export", headers=auth(tenant))
    assert exported.status_code == 200
    assert OTHER_AWS not in exported.text
    assert patch(client, tenant, {"secrets_unmasked_surfaces": ["export"]}).status_code == 200
    assert OTHER_AWS in client.get(f"{BASE}/export", headers=auth(tenant)).text


def test_a_pathological_pattern_runs_in_linear_time() -> None:
    """RE2 takes ``(a+)+$`` (Python's ``re`` backtracks exponentially on it) and stays linear."""
    settings = Settings(secrets_custom_patterns=[SecretPattern(kind="x", pattern=r"(a+)+$")])
    from lcm.secrets import DetectionRules, detect

    rules = DetectionRules.of(settings)
    text = "a" * 200_000 + "!"
    started = time.perf_counter()
    assert detect(text, rules) == []
    assert time.perf_counter() - started < 2.0


def test_the_console_surface_follows_the_setting(client: TestClient, tenant: IssuedKey) -> None:
    ingest(client, tenant, f"console key {OTHER_AWS} here", "c1")
    page = client.get("/console/login")
    token = re.search(r'name="login_token" value="([^"]+)"', page.text)
    assert token is not None
    form = {"api_key": tenant.api_key, "login_token": token.group(1)}
    assert client.post("/console/login", data=form, follow_redirects=False).status_code == 303
    conversations = client.get("/v1/conversations", headers=auth(tenant)).json()
    cid = conversations["conversations"][0]["conversation_id"]

    def shown() -> str:
        r = client.get(f"/console/conversations/{cid}/messages")
        assert r.status_code == 200, r.text
        return html.unescape(r.text)

    assert OTHER_AWS not in shown()
    assert "[secret:aws_key#1]" in shown()
    assert patch(client, tenant, {"secrets_unmasked_surfaces": ["console"]}).status_code == 200
    assert OTHER_AWS in shown()
    assert OTHER_AWS not in grep(client, tenant, "console key")[0]["snippet"]

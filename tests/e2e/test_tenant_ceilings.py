"""The deployment's limits are ceilings for a tenant's own settings (lcm/tenants/ceilings.py).

For every limit: a tenant key raising it (or switching it off) is refused 403
``above_ceiling`` naming the setting and the ceiling; lowering it is accepted
and is what applies; an operator (``update_overrides``, ``lcm tenant settings``)
can raise it, and that is logged to ``lcm.audit``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from lcm.db.engine import Database
from lcm.settings import Settings
from lcm.tenants.ceilings import CEILINGS, GRANTS
from lcm.tenants.repository import TenantRepository
from lcm.tenants.service import IssuedKey, update_overrides, with_overrides
from tests import servers
from tests.conftest import RecordingSender, api_client, auth

# setting: (the deployment's value, a tenant's raise, a tenant's lower value)
LIMITS: dict[str, tuple[Any, Any, Any]] = {
    "rate_limit_per_second": (50.0, 100.0, 40.0),
    "rate_limit_burst": (50, 100, 40),
    "max_stored_messages": (100, 300, 3),
    "max_file_bytes": (10**6, 2 * 10**6, 1_000),
    "llm_daily_token_budget": (1_000, 2_000, 500),
    "max_assembly_token_budget": (100_000, 200_000, 50_000),
    "summary_max_calls_per_window": (10, 20, 5),
    "sweep_max_passes": (100, 200, 50),
    "sweep_max_seconds": (60.0, 120.0, 30.0),
    "max_expand_tokens": (4_000, 8_000, 2_000),
}
# Where 0 means unlimited: a tenant may not switch these off.
SWITCH_OFF = ["rate_limit_per_second", "max_stored_messages", "max_file_bytes"]
DEPLOYMENT = {name: values[0] for name, values in LIMITS.items()}
SETTINGS = "/v1/tenant/settings"


def test_every_limit_is_covered() -> None:
    assert set(LIMITS) == set(CEILINGS)


@pytest.fixture
def deployment(db: Database) -> Settings:
    return db.settings.model_copy(update=DEPLOYMENT)


@pytest.fixture
def limited(db: Database, deployment: Settings) -> Iterator[TestClient]:
    yield from api_client(deployment, db, RecordingSender())


def patch(client: TestClient, tenant: IssuedKey, **changes: Any) -> Any:
    return client.patch(SETTINGS, json=changes, headers=auth(tenant))


@pytest.mark.parametrize("name", list(LIMITS))
def test_a_tenant_cannot_raise_a_limit(limited: TestClient, tenant: IssuedKey, name: str) -> None:
    ceiling, raised, _lower = LIMITS[name]
    response = patch(limited, tenant, **{name: raised})
    assert response.status_code == 403, response.text
    error = response.json()["error"]
    assert error["code"] == "above_ceiling"
    assert (error["setting"], error["ceiling"]) == (name, ceiling)
    assert name in error["message"]
    assert str(ceiling) in error["message"]
    settings = limited.get(SETTINGS, headers=auth(tenant)).json()
    assert name not in settings["overrides"]
    assert settings["effective"][name] == ceiling


@pytest.mark.parametrize("name", SWITCH_OFF)
def test_a_tenant_cannot_switch_a_limit_off(
    limited: TestClient, tenant: IssuedKey, name: str
) -> None:
    response = patch(limited, tenant, **{name: 0})
    assert response.status_code == 403
    assert response.json()["error"]["setting"] == name


@pytest.mark.parametrize("name", list(LIMITS))
def test_a_tenant_can_lower_a_limit(
    limited: TestClient, tenant: IssuedKey, deployment: Settings, db: Database, name: str
) -> None:
    _ceiling, _raised, lower = LIMITS[name]
    response = patch(limited, tenant, **{name: lower})
    assert response.status_code == 200, response.text
    assert response.json()["overrides"][name] == lower
    assert response.json()["effective"][name] == lower
    with db.read_session() as session:
        stored = TenantRepository(session).get(tenant.tenant_id)
        assert stored is not None
        assert getattr(with_overrides(deployment, stored.settings_overrides), name) == lower
    # Removing the override goes back to the deployment's value.
    assert patch(limited, tenant, **{name: None}).json()["effective"][name] == LIMITS[name][0]


def test_a_lowered_quota_is_enforced(limited: TestClient, tenant: IssuedKey) -> None:
    assert patch(limited, tenant, max_stored_messages=3).status_code == 200
    url = "/v1/conversations/demo/messages"
    batch = {"messages": [{"role": "user", "content": f"m{i}", "id": f"m{i}"} for i in range(3)]}
    assert limited.post(url, json=batch, headers=auth(tenant)).status_code == 200
    more = {"messages": [{"role": "user", "content": "one more", "id": "m9"}]}
    response = limited.post(url, json=more, headers=auth(tenant))
    assert response.status_code == 429
    assert response.json()["error"]["code"] == "quota_exceeded"


def test_a_lowered_rate_limit_is_enforced(limited: TestClient, tenant: IssuedKey) -> None:
    response = patch(limited, tenant, rate_limit_per_second=0.001, rate_limit_burst=2)
    assert response.status_code == 200
    codes = [limited.get(SETTINGS, headers=auth(tenant)).status_code for _ in range(4)]
    assert 429 in codes


@pytest.mark.parametrize("name", list(LIMITS))
def test_an_operator_can_raise_a_limit_and_it_is_audited(
    limited: TestClient,
    tenant: IssuedKey,
    db: Database,
    caplog: pytest.LogCaptureFixture,
    name: str,
) -> None:
    ceiling, raised, lower = LIMITS[name]
    with caplog.at_level(logging.INFO, logger="lcm.audit"), db.transaction() as session:
        update_overrides(session, tenant.tenant_id, {name: raised})
    [line] = [r for r in caplog.records if r.name == "lcm.audit"]
    assert tenant.tenant_id in line.getMessage()
    assert name in line.getMessage()
    settings = limited.get(SETTINGS, headers=auth(tenant)).json()
    assert settings["effective"][name] == raised
    assert name not in settings["overrides"]  # a grant, not the tenant's own value
    # The grant is the tenant's ceiling now: up to it, not above.
    assert patch(limited, tenant, **{name: lower}).json()["effective"][name] == lower
    assert patch(limited, tenant, **{name: raised}).json()["effective"][name] == raised
    above = raised * 2
    refused = patch(limited, tenant, **{name: above})
    assert refused.status_code == 403
    assert refused.json()["error"]["ceiling"] == raised
    assert ceiling < raised


def test_a_tenant_value_above_a_lowered_ceiling_is_clamped_a_grant_stays(
    deployment: Settings,
) -> None:
    stored = {"max_stored_messages": 90, GRANTS: {"max_file_bytes": 5 * 10**6}}
    lowered = deployment.model_copy(update={"max_stored_messages": 50, "max_file_bytes": 1_000})
    effective = with_overrides(lowered, stored)
    assert effective.max_stored_messages == 50  # the tenant's own 90: clamped
    assert effective.max_file_bytes == 5 * 10**6  # the operator's grant: kept
    switched_off = with_overrides(lowered, {"rate_limit_per_second": 0})
    assert switched_off.rate_limit_per_second == deployment.rate_limit_per_second


def test_lcm_tenant_settings_raises_and_logs(tmp_path: Path) -> None:
    url, _key = servers.embedded_home(tmp_path / "home", "acme")
    env = {"LCM_DATABASE_URL": url, "LCM_MAX_STORED_MESSAGES": "100"}
    done = servers.run_lcm(
        "tenant", "settings", "acme", "max_stored_messages=300", "--json", env=env
    )
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout.strip().splitlines()[-1])
    assert shown["effective"]["max_stored_messages"] == 300
    assert "operator changed the settings of tenant acme" in done.stderr
    assert "max_stored_messages" in done.stderr
    again = servers.run_lcm("tenant", "settings", "acme", "--json", env=env, check=True)
    assert json.loads(again.stdout)["effective"]["max_stored_messages"] == 300
    bad = servers.run_lcm("tenant", "settings", "acme", "max_stored_messages=-1", env=env)
    assert bad.returncode == 1

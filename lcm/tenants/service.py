"""Tenants and their per-tenant settings (API keys: ``lcm.tenants.keys``)."""

from __future__ import annotations

import json
import logging
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from pydantic import ValidationError
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, object_session

from lcm.db.models import Tenant
from lcm.errors import Conflict, InvalidInput, NotFound
from lcm.secret_rules import SecretPattern
from lcm.settings import (
    CompactionSettings,
    ModelOverride,
    SummaryModelOverride,
    SummaryModelRule,
    TenantSettings,
)
from lcm.storable import check_storable
from lcm.tenants.ceilings import CEILINGS, GRANTS, check_within, clamped
from lcm.tenants.key_cache import forget_keys_on_commit
from lcm.tenants.keys import IssuedKey, issue_key
from lcm.tenants.repository import TenantRepository

S = TypeVar("S", bound=CompactionSettings)

# Operators' changes to a tenant (settings beyond its ceilings): one line each.
audit = logging.getLogger("lcm.audit")


@dataclass(frozen=True, slots=True)
class TenantInfo:
    id: str
    name: str
    created_at: datetime
    active_keys: int


def new_tenant_id() -> str:
    return "ten_" + secrets.token_hex(8)


def create_tenant(session: Session, name: str) -> IssuedKey:
    """Create a tenant and its first key (every scope); the caller commits."""
    name = name.strip()
    if not name or len(name) > 200:
        raise InvalidInput("a tenant name is 1 to 200 characters")
    repo = TenantRepository(session)
    if repo.find_by_name(name) is not None:
        raise Conflict(f"tenant {name!r} already exists")
    savepoint = session.begin_nested()
    try:
        tenant = repo.add(Tenant(id=new_tenant_id(), name=name, settings_overrides={}))
        savepoint.commit()
    except IntegrityError as exc:
        savepoint.rollback()
        raise Conflict(f"tenant {name!r} already exists") from exc
    return issue_key(session, tenant)


def tenant_by_name(session: Session, name: str) -> Tenant:
    tenant = TenantRepository(session).find_by_name(name)
    if tenant is None:
        raise NotFound(f"no tenant named {name!r}")
    return tenant


def find_tenant(session: Session, name: str) -> Tenant | None:
    return TenantRepository(session).find_by_name(name)


def any_tenant(session: Session) -> bool:
    """True once any tenant exists (``lcm serve``'s first start creates one)."""
    return TenantRepository(session).any_tenant()


def tenant_names(session: Session) -> list[tuple[str, str]]:
    """Every tenant's ``(id, name)``, by id."""
    repo = TenantRepository(session)
    return [(tid, repo.get(tid).name) for tid in repo.all_ids()]  # type: ignore[union-attr]


def list_tenants(session: Session) -> list[TenantInfo]:
    return [
        TenantInfo(t.id, t.name, t.created_at, keys)
        for t, keys in TenantRepository(session).with_active_key_counts()
    ]


OVERRIDABLE = frozenset(TenantSettings.model_fields)


def validate_overrides(overrides: dict[str, Any]) -> dict[str, Any]:
    """Check per-tenant overrides against the settings' own rules (compaction and limits)."""
    unknown = sorted(set(overrides) - OVERRIDABLE)
    if unknown:
        raise InvalidInput(f"unknown settings: {', '.join(unknown)}")
    # Nothing is stored that cannot be served back (a lone surrogate in
    # custom_instructions used to be committed, then fail every GET).
    check_storable(overrides, "settings")
    try:
        checked = TenantSettings.model_validate(overrides)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise InvalidInput(f"invalid settings: {problems}") from exc
    # JSON-ready values (nested models such as model_overrides become dicts) for the JSON column.
    return checked.model_dump(mode="json", include=set(overrides))


def effective_settings(session: Session, tenant_id: str, base: S) -> S:
    """``base`` with the tenant's stored overrides on top."""
    tenant = TenantRepository(session).get(tenant_id)
    return with_overrides(base, tenant.settings_overrides if tenant is not None else None)


def with_overrides(base: S, overrides: dict[str, Any] | None) -> S:
    """``base`` with stored ``overrides`` (a tenant's ``settings_overrides``) on top:
    the operator's grants, then the tenant's own values within their ceilings
    (``lcm.tenants.ceilings``)."""
    if not overrides:
        return base
    own, grants = _split(overrides)
    effective = base.model_copy(update=_decoded({**grants, **own}))
    if own.keys() & CEILINGS.keys():
        ceiling = base.model_copy(update=_decoded(grants)) if grants else base
        effective = clamped(effective, ceiling, set(own))
    return effective


def _split(stored: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The tenant's own values and the operator's grants."""
    own = {k: v for k, v in stored.items() if k != GRANTS}
    return own, dict(stored.get(GRANTS) or {})


def _decoded(values: dict[str, Any]) -> dict[str, Any]:
    update = dict(values)
    if "model_overrides" in update:  # stored as JSON; model_copy does not validate
        update["model_overrides"] = [
            ModelOverride.model_validate(rule) for rule in update["model_overrides"]
        ]
    if "summary_model_overrides" in update:
        update["summary_model_overrides"] = [
            SummaryModelOverride.model_validate(rule) for rule in update["summary_model_overrides"]
        ]
    if "secrets_custom_patterns" in update:
        update["secrets_custom_patterns"] = [
            SecretPattern.model_validate(rule) for rule in update["secrets_custom_patterns"]
        ]
    if "summary_model_rules" in update:
        update["summary_model_rules"] = [
            SummaryModelRule.model_validate(rule) for rule in update["summary_model_rules"]
        ]
    return update


def stored_overrides(session: Session, tenant_id: str) -> dict[str, Any]:
    """The tenant's own overrides (the operator's grants show in its effective settings)."""
    tenant = TenantRepository(session).get(tenant_id)
    return _split(tenant.settings_overrides)[0] if tenant is not None else {}


def _merged(current: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    removals = {k for k, v in changes.items() if v is None}
    return {k: v for k, v in {**current, **changes}.items() if k not in removals}


def _store(tenant: Tenant, own: dict[str, Any], grants: dict[str, Any]) -> dict[str, Any]:
    stored = validate_overrides(own)
    if grants:
        stored[GRANTS] = validate_overrides(grants)
    tenant.settings_overrides = stored
    session = object_session(tenant)
    if session is not None:  # the overrides are remembered with the tenant's keys
        forget_keys_on_commit(session)
    return _split(stored)[0]


def _tenant(session: Session, tenant_id: str) -> Tenant:
    tenant = TenantRepository(session).get(tenant_id)
    if tenant is None:
        raise NotFound("no such tenant")
    return tenant


def update_own_overrides(
    session: Session, tenant_id: str, changes: dict[str, Any], deployment: TenantSettings
) -> dict[str, Any]:
    """The tenant's own change (``PATCH /v1/tenant/settings``): merged like
    :func:`update_overrides`, refused (:class:`AboveCeiling`) if it raises a limit
    above its ceiling, the operator's grant or else ``deployment``'s value."""
    tenant = _tenant(session, tenant_id)
    own, grants = _split(tenant.settings_overrides)
    own = _merged(own, changes)
    validate_overrides(own)  # a malformed value is a 400 before any comparison
    ceiling = deployment.model_copy(update=_decoded(grants)) if grants else deployment
    proposed = ceiling.model_copy(update=_decoded(own))
    check_within({k for k, v in changes.items() if v is not None}, proposed, ceiling)
    return _store(tenant, own, grants)


def update_overrides(session: Session, tenant_id: str, changes: dict[str, Any]) -> dict[str, Any]:
    """An operator's change: merge ``changes`` into the tenant's overrides (a null
    value removes one). A limit (``CEILINGS``) becomes a grant, the tenant's ceiling
    for it, whatever the deployment's value; the change is logged to ``lcm.audit``."""
    tenant = _tenant(session, tenant_id)
    own, grants = _split(tenant.settings_overrides)
    limits = {k: v for k, v in changes.items() if k in CEILINGS}
    grants = _merged(grants, limits)
    # A granted limit replaces the tenant's own value for it.
    own = _merged(own, {k: (None if k in CEILINGS else v) for k, v in changes.items()})
    stored = _store(tenant, own, grants)
    # Allow-listed values are logged as stored (hashed), never as given.
    changes = {k: stored.get(k) if k == "secrets_allow_list" else v for k, v in changes.items()}
    audit.info(
        "operator changed the settings of tenant %s (%s): %s",
        tenant.name,
        tenant_id,
        json.dumps(changes, sort_keys=True, default=str),
        extra={"tenant_id": tenant_id, "changes": changes},
    )
    return stored

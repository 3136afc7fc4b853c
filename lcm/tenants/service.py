"""Tenants and their per-tenant settings (API keys: ``lcm.tenants.keys``)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from pydantic import ValidationError
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from lcm.db.models import Tenant
from lcm.errors import Conflict, InvalidInput, NotFound
from lcm.settings import CompactionSettings, ModelOverride, TenantSettings
from lcm.storable import check_storable
from lcm.tenants.keys import IssuedKey, issue_key
from lcm.tenants.repository import TenantRepository

S = TypeVar("S", bound=CompactionSettings)


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
    """``base`` with stored ``overrides`` (a tenant's ``settings_overrides``) on top."""
    if not overrides:
        return base
    update = dict(overrides)
    if "model_overrides" in update:  # stored as JSON; model_copy does not validate
        update["model_overrides"] = [
            ModelOverride.model_validate(rule) for rule in update["model_overrides"]
        ]
    return base.model_copy(update=update)


def stored_overrides(session: Session, tenant_id: str) -> dict[str, Any]:
    tenant = TenantRepository(session).get(tenant_id)
    return dict(tenant.settings_overrides) if tenant is not None else {}


def update_overrides(session: Session, tenant_id: str, changes: dict[str, Any]) -> dict[str, Any]:
    """Merge ``changes`` into the tenant's overrides (a null value removes one)."""
    tenant = TenantRepository(session).get(tenant_id)
    if tenant is None:
        raise NotFound("no such tenant")
    removals = {k for k, v in changes.items() if v is None}
    merged = {
        k: v for k, v in {**tenant.settings_overrides, **changes}.items() if k not in removals
    }
    tenant.settings_overrides = validate_overrides(merged)
    return dict(tenant.settings_overrides)

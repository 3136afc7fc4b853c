"""Tenants and API keys. A key is shown once; only its SHA-256 is stored.

Keys are 256 random bits, so a fast hash is enough: there is nothing to brute
force, and lookups stay one indexed equality per request.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import ValidationError
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from lcm.db.models import ApiKey, Tenant
from lcm.errors import Conflict, InvalidInput, NotFound, Unauthenticated
from lcm.settings import CompactionSettings, TenantSettings
from lcm.storable import check_storable
from lcm.tenants.repository import TenantRepository

KEY_PREFIX = "lcm_"
S = TypeVar("S", bound=CompactionSettings)


@dataclass(frozen=True)
class IssuedKey:
    tenant_id: str
    tenant_name: str
    api_key: str


def hash_key(raw_key: str) -> str:
    return hashlib.sha256(raw_key.encode("utf-8")).hexdigest()


def new_tenant_id() -> str:
    return "ten_" + secrets.token_hex(8)


def create_tenant(session: Session, name: str) -> IssuedKey:
    """Create a tenant and its first key; the caller commits."""
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


def issue_key(session: Session, tenant: Tenant, label: str = "default") -> IssuedKey:
    raw = KEY_PREFIX + secrets.token_urlsafe(32)
    TenantRepository(session).add_key(
        ApiKey(tenant_id=tenant.id, key_hash=hash_key(raw), prefix=raw[:12], name=label)
    )
    return IssuedKey(tenant_id=tenant.id, tenant_name=tenant.name, api_key=raw)


def issue_key_for(session: Session, tenant_name: str, label: str = "default") -> IssuedKey:
    tenant = TenantRepository(session).find_by_name(tenant_name)
    if tenant is None:
        raise NotFound(f"no tenant named {tenant_name!r}")
    return issue_key(session, tenant, label)


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
    return {key: getattr(checked, key) for key in overrides}


def effective_settings(session: Session, tenant_id: str, base: S) -> S:
    """``base`` with the tenant's stored overrides on top."""
    tenant = TenantRepository(session).get(tenant_id)
    if tenant is None or not tenant.settings_overrides:
        return base
    return base.model_copy(update=tenant.settings_overrides)


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


def authenticate(session: Session, raw_key: str) -> str:
    """The tenant id owning ``raw_key``; ``Unauthenticated`` otherwise."""
    tenant_id = TenantRepository(session).tenant_id_for_key_hash(hash_key(raw_key))
    if tenant_id is None:
        raise Unauthenticated("the API key is not valid")
    return tenant_id

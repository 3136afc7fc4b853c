"""Tenants, API keys and per-tenant settings."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lcm.exports import lazy_exports

if TYPE_CHECKING:
    from lcm.tenants.console_sessions import (
        SESSION_SECONDS,
        ConsoleSession,
        check_session,
        csrf_matches,
        open_session,
        text_matches,
    )
    from lcm.tenants.host_usage import HostTurnUsage, record_host_usage
    from lcm.tenants.key_cache import forget_keys_on_commit
    from lcm.tenants.keys import (
        DEFAULT_SCOPES,
        SCOPES,
        IssuedKey,
        KeyInfo,
        Principal,
        Scope,
        authenticate,
        authenticate_with_tenant,
        create_key,
        hash_key,
        issue_key,
        list_keys,
        remembered_key,
        revoke_key,
        rotate_key,
    )
    from lcm.tenants.quota import UNLIMITED, StorageQuota, charge_storage
    from lcm.tenants.repository import TenantRepository
    from lcm.tenants.service import (
        OVERRIDABLE,
        any_tenant,
        create_tenant,
        effective_settings,
        find_tenant,
        list_tenants,
        stored_overrides,
        tenant_by_name,
        tenant_names,
        update_overrides,
        update_own_overrides,
        with_overrides,
    )
    from lcm.tenants.spend import llm_budget_exhausted, require_llm_budget
    from lcm.tenants.usage import estimate_cost, usage_report

__all__ = [
    "DEFAULT_SCOPES",
    "OVERRIDABLE",
    "SCOPES",
    "SESSION_SECONDS",
    "UNLIMITED",
    "ConsoleSession",
    "HostTurnUsage",
    "IssuedKey",
    "KeyInfo",
    "Principal",
    "Scope",
    "StorageQuota",
    "TenantRepository",
    "any_tenant",
    "authenticate",
    "authenticate_with_tenant",
    "charge_storage",
    "check_session",
    "create_key",
    "create_tenant",
    "csrf_matches",
    "effective_settings",
    "estimate_cost",
    "find_tenant",
    "forget_keys_on_commit",
    "hash_key",
    "issue_key",
    "list_keys",
    "list_tenants",
    "llm_budget_exhausted",
    "open_session",
    "record_host_usage",
    "remembered_key",
    "require_llm_budget",
    "revoke_key",
    "rotate_key",
    "stored_overrides",
    "tenant_by_name",
    "tenant_names",
    "text_matches",
    "update_overrides",
    "update_own_overrides",
    "usage_report",
    "with_overrides",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "lcm.tenants.console_sessions": (
            "ConsoleSession",
            "SESSION_SECONDS",
            "check_session",
            "csrf_matches",
            "open_session",
            "text_matches",
        ),
        "lcm.tenants.host_usage": ("HostTurnUsage", "record_host_usage"),
        "lcm.tenants.key_cache": ("forget_keys_on_commit",),
        "lcm.tenants.keys": (
            "IssuedKey",
            "KeyInfo",
            "Principal",
            "DEFAULT_SCOPES",
            "SCOPES",
            "Scope",
            "authenticate",
            "authenticate_with_tenant",
            "create_key",
            "hash_key",
            "issue_key",
            "list_keys",
            "remembered_key",
            "revoke_key",
            "rotate_key",
        ),
        "lcm.tenants.quota": ("StorageQuota", "UNLIMITED", "charge_storage"),
        "lcm.tenants.repository": ("TenantRepository",),
        "lcm.tenants.service": (
            "OVERRIDABLE",
            "any_tenant",
            "create_tenant",
            "effective_settings",
            "find_tenant",
            "list_tenants",
            "stored_overrides",
            "tenant_by_name",
            "tenant_names",
            "update_overrides",
            "update_own_overrides",
            "with_overrides",
        ),
        "lcm.tenants.spend": ("llm_budget_exhausted", "require_llm_budget"),
        "lcm.tenants.usage": ("estimate_cost", "usage_report"),
    },
)

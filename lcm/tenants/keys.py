"""API keys: several per tenant, each with a set of scopes; issued, listed, revoked, rotated.

A key is shown once; only its SHA-256 is stored. Keys are 256 random bits,
so a fast hash is enough: there is nothing to brute force, and lookups stay
one indexed equality per request. A key found active is remembered by the
process for ``LCM_KEY_CACHE_SECONDS`` (``lcm/tenants/key_cache.py``): a
revocation takes effect on the next request in the process that made it,
and within that bound in every other.

Scopes say what a key may do: ``ingest`` writes conversations (messages,
turns, commits, bootstrap, compact, forks), ``read`` reads them (assemble,
status, grep, describe, expand, expand-query), ``admin`` manages the tenant
(settings, keys), ``secrets`` lets a key ask for the originals of detected
secrets (``with_secrets=true`` on describe, expand and exports, each read
audited; docs/secrets.md). An agent's tools can hold a ``read`` key that can
neither write nor manage anything. ``secrets`` is never granted by default:
a key gets it only when it is named.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, get_args

from sqlalchemy.orm import Session

from lcm.db.models import ApiKey, Tenant, utcnow
from lcm.errors import Conflict, Forbidden, InvalidInput, NotFound, Unauthenticated
from lcm.tenants.key_cache import ACTIVE_KEYS, forget_keys_on_commit
from lcm.tenants.repository import TenantRepository

KEY_PREFIX = "lcm_"
Scope = Literal["ingest", "read", "admin", "secrets"]
SCOPES: tuple[Scope, ...] = get_args(Scope)
# What a key gets when none are named: everything but reading originals.
DEFAULT_SCOPES: tuple[Scope, ...] = ("ingest", "read", "admin")


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the tenant, the key it used and what that key may do."""

    tenant_id: str
    key_id: int
    scopes: frozenset[str]

    def require(self, scope: Scope) -> None:
        if scope not in self.scopes:
            raise Forbidden(f"this API key lacks the {scope!r} scope")


@dataclass(frozen=True, slots=True)
class KeyInfo:
    """What may be shown about a key: never its hash, never the key itself."""

    id: int
    name: str
    prefix: str
    scopes: tuple[Scope, ...]
    created_at: datetime
    revoked_at: datetime | None

    @classmethod
    def of(cls, key: ApiKey) -> KeyInfo:
        return cls(
            key.id, key.name, key.prefix, parse_scopes(key.scopes), key.created_at, key.revoked_at
        )


@dataclass(frozen=True, slots=True)
class IssuedKey:
    """A new key, the only time its raw value exists outside the caller's hands."""

    tenant_id: str
    tenant_name: str
    api_key: str
    key: KeyInfo


def hash_key(raw_key: str) -> str:
    return hashlib.sha256(raw_key.encode("utf-8")).hexdigest()


def checked_scopes(scopes: Iterable[str]) -> tuple[Scope, ...]:
    """``scopes`` without repeats, in canonical order; unknown or none is ``InvalidInput``."""
    wanted = set(scopes)
    unknown = sorted(wanted - set(SCOPES))
    if unknown:
        raise InvalidInput(f"unknown scopes: {', '.join(unknown)} (known: {', '.join(SCOPES)})")
    if not wanted:
        raise InvalidInput("a key needs at least one scope")
    return tuple(s for s in SCOPES if s in wanted)


def parse_scopes(stored: str) -> tuple[Scope, ...]:
    """The stored comma list as scopes (an unknown name, e.g. from a newer release, is skipped)."""
    names = set(stored.split(","))
    return tuple(s for s in SCOPES if s in names)


def issue_key(
    session: Session, tenant: Tenant, name: str = "default", scopes: Iterable[str] = DEFAULT_SCOPES
) -> IssuedKey:
    """A new key for ``tenant``; the caller commits."""
    name = name.strip()
    if not name or len(name) > 200:
        raise InvalidInput("a key name is 1 to 200 characters")
    granted = checked_scopes(scopes)
    raw = KEY_PREFIX + secrets.token_urlsafe(32)
    key = TenantRepository(session).add_key(
        ApiKey(
            tenant_id=tenant.id,
            key_hash=hash_key(raw),
            prefix=raw[:12],
            name=name,
            scopes=",".join(granted),
        )
    )
    return IssuedKey(tenant.id, tenant.name, raw, KeyInfo.of(key))


def create_key(
    session: Session, tenant_id: str, name: str, scopes: Iterable[str] = DEFAULT_SCOPES
) -> IssuedKey:
    tenant = TenantRepository(session).get(tenant_id)
    if tenant is None:
        raise NotFound("no such tenant")
    return issue_key(session, tenant, name, scopes)


def list_keys(session: Session, tenant_id: str) -> list[KeyInfo]:
    """Every key of the tenant, revoked ones included, oldest first."""
    return [KeyInfo.of(key) for key in TenantRepository(session).keys_of(tenant_id)]


def revoke_key(session: Session, tenant_id: str, key_id: int) -> KeyInfo:
    """Revoke a key (again: a no-op that keeps the first revocation's time)."""
    repo = TenantRepository(session)
    key = repo.get_key(tenant_id, key_id)
    if key is None:
        raise NotFound(f"no key {key_id}")
    repo.revoke_key(tenant_id, key_id, utcnow())
    forget_keys_on_commit(session)
    return KeyInfo.of(key)


def rotate_key(session: Session, tenant_id: str, key_id: int) -> IssuedKey:
    """A new key with the old one's name and scopes; the old one revoked in the same transaction.

    The revocation comes first and is conditional (only an unrevoked key):
    of two concurrent rotations of one key, the second waits on the first's
    row lock (Postgres) or the write lock (SQLite), then finds the key revoked
    and fails with ``Conflict``, so one key never turns into two.
    """
    repo = TenantRepository(session)
    old = repo.get_key(tenant_id, key_id)
    if old is None:
        raise NotFound(f"no key {key_id}")
    if not repo.revoke_key(tenant_id, key_id, utcnow()):
        raise Conflict(f"key {key_id} is revoked; create a new key instead")
    forget_keys_on_commit(session)
    tenant = repo.get(tenant_id)
    assert tenant is not None  # the key's foreign key guarantees it
    return issue_key(session, tenant, old.name, parse_scopes(old.scopes))


def authenticate(session: Session, raw_key: str) -> Principal:
    """The principal holding ``raw_key``; ``Unauthenticated`` if unknown or revoked."""
    return authenticate_with_tenant(session, raw_key)[0]


def authenticate_with_tenant(
    session: Session, raw_key: str, *, remember_seconds: float = 0.0
) -> tuple[Principal, dict[str, Any]]:
    """The principal holding ``raw_key`` and its tenant's stored settings overrides
    (read by the same query); remembered ``remember_seconds`` if more than 0
    (see :func:`remembered_key`). The overrides are shared: never change them."""
    key_hash = hash_key(raw_key)
    generation = ACTIVE_KEYS.generation  # before the read (KeyCache.put)
    found = TenantRepository(session).active_key_with_tenant(key_hash)
    if found is None:
        raise Unauthenticated("the API key is not valid")
    principal = Principal(found.tenant_id, found.key_id, frozenset(parse_scopes(found.scopes)))
    if remember_seconds > 0:
        ACTIVE_KEYS.put(key_hash, (principal, found.settings_overrides), generation)
    return principal, found.settings_overrides


def remembered_key(raw_key: str, within_seconds: float) -> tuple[Principal, dict[str, Any]] | None:
    """What :func:`authenticate_with_tenant` found for ``raw_key`` at most
    ``within_seconds`` ago in this process, unless a key or tenant change was
    committed since (``lcm/tenants/key_cache.py``); None otherwise."""
    if within_seconds <= 0:
        return None
    found = ACTIVE_KEYS.get(hash_key(raw_key), within_seconds)
    return None if found is None else (found[0], found[1])

"""Console sign-in sessions: a token that names an admin key without containing it.

Decision: the console cookie carries neither the API key nor a server-side
session id. It carries ``<tenant id>.<key id>.<issued at>.<nonce>.<mac>``, where the
MAC is an HMAC-SHA256 keyed by the key's *stored hash*. So:

* no new table and no process secret (several API processes accept each
  other's cookies, and a restart signs nobody out);
* the cookie is useless as an API key, and forging one needs the stored hash,
  which only the database and the key's holder can know;
* every request re-reads the key row (no cache), so revoking or rotating the
  key signs its console sessions out on their next request, exactly as the
  API refuses the key on its next request; a session also expires after
  :data:`SESSION_SECONDS`.

The CSRF token of a session is another HMAC under the same key, over the
session token: stable for the session, different for every session, and
checkable without storing anything.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from lcm.errors import Unauthenticated
from lcm.int64 import parse_int64
from lcm.tenants.keys import Principal, authenticate, hash_key, parse_scopes
from lcm.tenants.repository import TenantRepository

SESSION_SECONDS = 12 * 3600
# What a token this module issued looks like: printable ASCII, bounded. Any
# other cookie (NUL, non-ASCII, a megabyte) is "not signed in" before it is
# split, parsed or sent to the database.
_TOKEN_SHAPE = re.compile(r"[\x21-\x7e]{1,512}")


@dataclass(frozen=True, slots=True)
class ConsoleSession:
    """A signed-in console user: an admin key's principal, its cookie token and CSRF token."""

    principal: Principal
    token: str
    csrf_token: str


def _mac(key_hash: str, message: str) -> str:
    return hmac.new(key_hash.encode(), message.encode(), hashlib.sha256).hexdigest()


def _session(principal: Principal, key_hash: str, token: str) -> ConsoleSession:
    return ConsoleSession(principal, token, _mac(key_hash, "csrf:" + token))


def open_session(session: Session, raw_key: str, now: datetime) -> ConsoleSession:
    """Sign in with ``raw_key``: ``Unauthenticated`` if unknown, ``Forbidden`` if not admin."""
    principal = authenticate(session, raw_key.strip())
    principal.require("admin")
    # The nonce makes every sign-in its own session (and CSRF token), even
    # two of one key within the same second.
    nonce = secrets.token_hex(8)
    body = f"{principal.tenant_id}.{principal.key_id}.{int(now.timestamp())}.{nonce}"
    key_hash = hash_key(raw_key.strip())
    return _session(principal, key_hash, f"{body}.{_mac(key_hash, body)}")


def check_session(session: Session, token: str, now: datetime) -> ConsoleSession:
    """The session ``token`` stands for, or ``Unauthenticated`` (forged, expired, key revoked)."""
    if not _TOKEN_SHAPE.fullmatch(token):
        raise Unauthenticated("not signed in")
    body, _, mac = token.rpartition(".")
    parts = body.split(".")
    key_id = parse_int64(parts[1]) if len(parts) == 4 else None
    issued = parse_int64(parts[2]) if len(parts) == 4 else None
    if key_id is None or issued is None or not parts[0]:
        raise Unauthenticated("not signed in")
    tenant_id = parts[0]
    key = TenantRepository(session).get_key(tenant_id, key_id)
    if key is None or key.revoked_at is not None:
        raise Unauthenticated("the key of this session is revoked; sign in again")
    if not text_matches(mac, _mac(key.key_hash, body)):
        raise Unauthenticated("not signed in")
    if not 0 <= now.timestamp() - issued <= SESSION_SECONDS:
        raise Unauthenticated("the session expired; sign in again")
    principal = Principal(tenant_id, key_id, frozenset(parse_scopes(key.scopes)))
    principal.require("admin")  # scopes cannot change today; checked all the same
    return _session(principal, key.key_hash, token)


def text_matches(expected: str, submitted: str) -> bool:
    """A constant-time comparison that any submitted text can reach without raising.

    ``hmac.compare_digest`` raises on a ``str`` holding non-ASCII characters,
    so both sides are compared as bytes (a lone surrogate kept as such).
    """
    encoded = submitted.encode("utf-8", "surrogatepass")
    return hmac.compare_digest(expected.encode("utf-8", "surrogatepass"), encoded)


def csrf_matches(console: ConsoleSession, submitted: str | None) -> bool:
    return submitted is not None and text_matches(console.csrf_token, submitted)

"""Expansion grants: the licence an expand-query loop reads under.

A grant names the conversations the loop may read, how many tokens it may
read in total, and until when. Every tool call checks it and debits what it
returned, in its own short transaction, so the budget is spent as the model
reads, not settled at the end, and a revocation (the API gave up waiting, or
the loop finished) stops the very next call. Beat deletes old grants.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from lcm.db.models import ExpansionGrant
from lcm.errors import Forbidden
from lcm.retrieval.grants_repository import GrantRepository
from lcm.retrieval.lease_repository import LeaseRepository

GRANT_PREFIX = "grant_"


@dataclass(frozen=True, slots=True)
class Grant:
    id: str
    tenant_id: str
    conversation_ids: frozenset[int]
    token_cap: int
    tokens_used: int
    expires_at: datetime
    revoked: bool

    @property
    def remaining(self) -> int:
        return max(self.token_cap - self.tokens_used, 0)


def issue_grant(
    session: Session,
    tenant_id: str,
    conversation_ids: Sequence[int],
    token_cap: int,
    ttl_seconds: float,
    now: datetime,
    request: dict[str, Any] | None = None,
) -> Grant:
    """A new grant (with the request it licenses); the caller commits before enqueueing."""
    row = ExpansionGrant(
        id=GRANT_PREFIX + secrets.token_hex(12),
        tenant_id=tenant_id,
        conversation_ids=sorted(set(conversation_ids)),
        token_cap=token_cap,
        tokens_used=0,
        expires_at=now + timedelta(seconds=ttl_seconds),
        revoked=False,
        created_at=now,
        request=request,
    )
    GrantRepository(session).add(row)
    return _view(row)


def check_grant(session: Session, grant_id: str, now: datetime, *, lock: bool = False) -> Grant:
    """The grant if it may still be used; :class:`Forbidden` if revoked, expired or unknown."""
    row = GrantRepository(session).get(grant_id, lock=lock)
    if row is None:
        raise Forbidden(f"expansion grant {grant_id} does not exist", code="grant_invalid")
    if row.revoked:
        raise Forbidden(f"expansion grant {grant_id} was revoked", code="grant_revoked")
    if row.expires_at <= now:
        raise Forbidden(f"expansion grant {grant_id} has expired", code="grant_expired")
    return _view(row)


def debit(session: Session, grant_id: str, wanted: int, now: datetime) -> int:
    """Take up to ``wanted`` tokens from the grant; how many were granted (0 = exhausted).

    The grant row is locked for the read-modify-write (``FOR UPDATE`` on
    Postgres; SQLite's write transaction already holds the database lock),
    so concurrent debits can never overspend the cap.
    """
    grant = check_grant(session, grant_id, now, lock=True)
    granted = min(max(wanted, 0), grant.remaining)
    if granted:
        GrantRepository(session).set_used(grant_id, grant.tokens_used + granted)
    return granted


def revoke_grant(session: Session, grant_id: str) -> None:
    GrantRepository(session).revoke(grant_id)


@dataclass(frozen=True, slots=True)
class GrantSweep:
    revoked: int
    deleted: int
    leases: int = 0  # expired expansion leases deleted


def sweep_grants(session: Session, now: datetime, retention: timedelta) -> GrantSweep:
    """Mark expired grants revoked, and delete those ended longer than ``retention`` ago.

    Expired expansion leases (whose API process died before releasing them)
    go too: an expired lease blocks nothing, but would stay a row forever.
    """
    repo = GrantRepository(session)
    return GrantSweep(
        repo.revoke_expired(now),
        repo.delete_ended_before(now - retention),
        LeaseRepository(session).delete_expired(now),
    )


def _view(row: ExpansionGrant) -> Grant:
    return Grant(
        id=row.id,
        tenant_id=row.tenant_id,
        conversation_ids=frozenset(row.conversation_ids),
        token_cap=row.token_cap,
        tokens_used=row.tokens_used,
        expires_at=row.expires_at,
        revoked=row.revoked,
    )

"""Per-tenant retention: erase conversations idle longer than ``retention_days``.

Idle means no message written since then, read from ``conversations.updated_at``
(the server's clock at each write, indexed with the tenant), never from the
messages' own timestamps, which a bootstrapped transcript may set years back.

Each conversation is erased in its own short transaction, so one refused
erase (a later session still starts from its summaries) does not hold back
the others: it is skipped and logged, and goes once the conversation that
uses it has gone too.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from lcm.db.engine import Transaction
from lcm.erasure.repository import ErasureRepository
from lcm.erasure.service import Erased, erase_conversations, remove_released_blobs
from lcm.errors import Conflict
from lcm.files.storage import FileStorage
from lcm.settings import Settings
from lcm.tenants.repository import TenantRepository
from lcm.tenants.service import effective_settings, with_overrides

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetentionOutcome:
    erased: list[int]
    skipped: list[int]


def sweep_retention(
    transaction: Transaction,
    read_session: Transaction,
    storage: FileStorage,
    settings: Settings,
    now: datetime,
) -> RetentionOutcome:
    """Erase, for every tenant with ``retention_days``, up to a batch of idle conversations."""
    erased: list[int] = []
    skipped: list[int] = []
    with read_session() as session:
        due = [
            (
                tenant_id,
                ErasureRepository(session).idle_conversation_ids(
                    tenant_id, now - timedelta(days=days), settings.retention_batch
                ),
            )
            for tenant_id, days in _retention_days(session, settings)
        ]
    for tenant_id, ids in due:
        for conversation_id in ids:
            try:
                with transaction() as session:
                    # Re-checked under the row lock: a message may have arrived
                    # since the read above, and then the conversation is not idle.
                    result = _erase_if_still_idle(
                        session, tenant_id, conversation_id, now, settings
                    )
            except Conflict as exc:
                log.info("retention keeps conversation %s for now: %s", conversation_id, exc)
                skipped.append(conversation_id)
                continue
            if result is not None:
                remove_released_blobs(read_session, storage, result)
                erased.extend(result.conversation_ids)
    if erased:
        log.info("retention erased %d idle conversation(s)", len(erased))
    return RetentionOutcome(erased, skipped)


def _retention_days(session: Session, settings: Settings) -> list[tuple[str, int]]:
    # One statement for every tenant's overrides, not a lookup per tenant:
    # a deployment of many tenants would otherwise pay a round trip for each.
    found = [
        (tenant_id, with_overrides(settings, overrides).retention_days)
        for tenant_id, overrides in TenantRepository(session).all_overrides()
    ]
    return [(t, days) for t, days in found if days is not None]


def _erase_if_still_idle(
    session: Session, tenant_id: str, conversation_id: int, now: datetime, settings: Settings
) -> Erased | None:
    repo = ErasureRepository(session)
    if not repo.lock_conversations(tenant_id, [conversation_id]):
        return None  # erased meanwhile
    days = effective_settings(session, tenant_id, settings).retention_days
    if days is None:
        return None  # the tenant turned retention off meanwhile
    if not repo.is_idle(conversation_id, now - timedelta(days=days)):
        return None
    return erase_conversations(session, tenant_id, [conversation_id])

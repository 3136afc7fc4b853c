"""Erasing: one conversation, a session family, or a whole tenant.

Every erase is one transaction (the caller's): messages, parts, context
items, summaries and their links, search rows, debt, grants, turn commits,
forks, runs and large-file rows go together or not at all. LLM usage rows
stay as billing history with their conversation link cleared.

Stored large-file contents are not in the database, so they cannot be in the
transaction: an erase returns the storage URIs it released, and the caller
removes them with :func:`remove_released_blobs` once the transaction has
committed (never before: a rollback would leave rows pointing at nothing).
Contents are content-addressed per tenant, so a URI still used by another
conversation's file is kept. One narrow window is left: the same bytes
ingested into another conversation of the tenant between that check and the
removal would find their object gone (their row commits, the content does
not survive); nothing locks a content address across both stores.

A compaction pass running for an erased conversation cannot write: it
commits only after re-locking its debt row and checking its fencing token
(``lcm.compaction.debt_repository.check_fence``), and that row is the first thing an
erase deletes. The pass finds it gone and drops its result.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from lcm.conversations.service import conversation_in_family
from lcm.db.engine import Transaction
from lcm.erasure.repository import ErasureRepository
from lcm.errors import Conflict, InvalidInput, NotFound
from lcm.files.storage import FileStorage
from lcm.progress import OnProgress, no_progress
from lcm.tenants import forget_keys_on_commit
from lcm.tenants.repository import TenantRepository

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Erased:
    """What an erase removed (tenant, conversations, rows); blobs to remove after commit."""

    tenant_id: str  # the blobs' owner: a stored blob belongs to one tenant (FileStorage.put)
    conversation_ids: list[int]
    rows: int
    released_uris: frozenset[str] = field(default_factory=frozenset)


def erase_conversations(session: Session, tenant_id: str, ids: Collection[int]) -> Erased:
    """Erase the tenant's conversations ``ids`` (unknown ids are ignored).

    Refused (``Conflict``) while another conversation's context or summaries
    still point at their summaries (a later session that started from them,
    a fork): erase those first, or the whole family at once.
    """
    repo = ErasureRepository(session)
    locked = repo.lock_conversations(tenant_id, ids)
    if not locked:
        return Erased(tenant_id, [], 0)
    referencing = repo.referencing_conversations(locked)
    if referencing:
        raise Conflict(
            f"conversations {referencing} still use summaries of {locked}; erase them first",
            code="conversation_referenced",
        )
    uris = repo.storage_uris(locked)
    messages, file_bytes = repo.stored_totals(locked)
    rows = repo.delete_conversations(tenant_id, locked)
    # The quota counters stop counting what is gone (same transaction as the delete).
    TenantRepository(session).release_storage(tenant_id, messages, file_bytes)
    log.info("erased conversations %s of tenant %s (%d rows)", locked, tenant_id, rows)
    return Erased(tenant_id, locked, rows, frozenset(uris))


def erase_conversation(session: Session, tenant_id: str, conversation_id: int) -> Erased:
    erased = erase_conversations(session, tenant_id, [conversation_id])
    if not erased.conversation_ids:
        raise NotFound(f"no conversation {conversation_id}")
    return erased


def erase_family(session: Session, tenant_id: str, session_key: str) -> Erased:
    """Erase every conversation of the session family ``session_key``."""
    ids = ErasureRepository(session).family_ids(tenant_id, session_key)
    erased = erase_conversations(session, tenant_id, ids)
    if not erased.conversation_ids:
        raise NotFound(f"no conversation for session key {session_key!r}")
    return erased


def erase_tenant(session: Session, tenant_id: str, on_progress: OnProgress = no_progress) -> Erased:
    """Erase the tenant and every row it owns, its keys included.

    ``on_progress`` hears of each delete statement done (a big tenant's
    erase is a few dozen long statements in one transaction).
    """
    if TenantRepository(session).get(tenant_id) is None:
        raise NotFound("no such tenant")
    return _erase_tenant(session, tenant_id, on_progress)


def erase_own_tenant(session: Session, tenant_id: str, confirm: str) -> Erased:
    """The calling tenant erases itself; ``confirm`` must repeat its name (400 otherwise)."""
    tenant = TenantRepository(session).get(tenant_id)
    if tenant is None or confirm != tenant.name:
        raise InvalidInput(
            "to erase this tenant, repeat its name in ?confirm=", code="confirm_required"
        )
    return _erase_tenant(session, tenant_id)


def _erase_tenant(
    session: Session, tenant_id: str, on_progress: OnProgress = no_progress
) -> Erased:
    repo = ErasureRepository(session)
    ids = repo.lock_conversations(tenant_id, repo.tenant_conversation_ids(tenant_id))
    uris = repo.tenant_storage_uris(tenant_id)
    rows = repo.delete_tenant(tenant_id, on_progress)
    forget_keys_on_commit(session)  # its keys are gone with it
    log.info("erased tenant %s (%d conversations, %d rows)", tenant_id, len(ids), rows)
    return Erased(tenant_id, ids, rows, frozenset(uris))


def erase_tenant_named(
    session: Session, name: str, on_progress: OnProgress = no_progress
) -> Erased:
    tenant = TenantRepository(session).find_by_name(name)
    if tenant is None:
        raise NotFound(f"no tenant named {name!r}")
    return erase_tenant(session, tenant.id, on_progress)


def erase_in_family(
    session: Session,
    tenant_id: str,
    session_key: str,
    session_id: str | None,
    conversation_id: int | None,
) -> Erased:
    """The family, or the one conversation of it named by session id or conversation id."""
    if session_id is None and conversation_id is None:
        return erase_family(session, tenant_id, session_key)
    target = conversation_in_family(session, tenant_id, session_key, session_id, conversation_id)
    return erase_conversation(session, tenant_id, target.id)


def erase_then_release(
    transaction: Transaction,
    read_session: Transaction,
    storage: FileStorage,
    erase: Callable[[Session], Erased],
) -> Erased:
    """Run ``erase`` in its own unit of work; once committed, remove the released contents."""
    with transaction() as session:
        erased = erase(session)
    remove_released_blobs(read_session, storage, erased)
    return erased


def remove_released_blobs(
    read_session: Transaction,
    storage: FileStorage,
    erased: Erased,
) -> int:
    """After the erase committed: remove the released contents no file row uses; return how many.

    A failure is logged, not raised: the erase itself is committed, and a
    leftover object is unreachable (no row names it).
    """
    if not erased.released_uris:
        return 0
    with read_session() as session:
        still_used = ErasureRepository(session).referenced_uris(
            erased.tenant_id, erased.released_uris
        )
    removed = 0
    for uri in sorted(erased.released_uris - still_used):
        try:
            storage.delete(uri)
            removed += 1
        except Exception:
            log.warning("could not remove stored file %s", uri, exc_info=True)
    return removed

"""Commit one accepted host turn exactly once, keyed by the host's advancement key.

A host (OpenClaw's durable turns) may retry ``commitTurn`` with the same key
after a crash or a timeout; the second call must not store the turn again.
The key is stored with the conversation in ``turn_commits``, in the same
transaction as the turn's messages and its threshold debt, so a commit is all
or nothing and a retry finds the key. Message client ids are not used for
this: a host may send a turn's messages without ids, and a retry must still be
a duplicate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from sqlalchemy.orm import Session

from lcm.address import SessionAddress
from lcm.content import PreparedMessage
from lcm.conversations.patterns import WriteSkip, write_skip
from lcm.conversations.service import resolve_for_write
from lcm.db.models import TurnCommit
from lcm.files.storage import FileStorage
from lcm.ingest.turns import LivePrompt, TurnResult, record_turn
from lcm.lifecycle.repository import LifecycleRepository
from lcm.policy.overrides import ModelInfo
from lcm.settings import Settings


@dataclass(frozen=True, slots=True)
class CommitResult:
    conversation_id: int | None  # None when skipped
    status: Literal["committed", "duplicate", "skipped"]
    turn: TurnResult | None  # None for a duplicate: nothing was written
    skipped: WriteSkip | None = None


def commit_turn(
    session: Session,
    address: SessionAddress,
    advancement_key: str,
    batch: Sequence[PreparedMessage],
    token_budget: int,
    settings: Settings,
    storage: FileStorage,
    model: ModelInfo | None = None,
    live: LivePrompt | None = None,
) -> CommitResult:
    """Store the turn and its key, or report ``duplicate`` if the key is known; caller commits.

    ``settings`` are the tenant's effective settings.
    """
    tenant_id = address.tenant_id
    skip = write_skip(settings, address.session_key)
    if skip is not None:  # ignored or stateless: nothing stored, not even the key
        return CommitResult(None, "skipped", None, skip)
    retain = settings.new_session_retain_depth
    # resolve_for_write locks the conversation row (Postgres FOR UPDATE; SQLite
    # holds the write lock for the transaction), so two concurrent commits of
    # one conversation run one after the other and the second sees the first's
    # key. The unique (conversation_id, advancement_key) constraint backs this.
    conversation = resolve_for_write(
        session, tenant_id, address.session_key, address.session_id, retain_depth=retain
    )
    repo = LifecycleRepository(session)
    if repo.find_commit(conversation.id, advancement_key) is not None:
        return CommitResult(conversation.id, "duplicate", None)
    turn = record_turn(session, address, batch, token_budget, settings, storage, model, live)
    repo.add_commit(
        TurnCommit(
            tenant_id=tenant_id,
            conversation_id=conversation.id,
            advancement_key=advancement_key,
            message_count=turn.ingest.ingested if turn.ingest else 0,
        )
    )
    return CommitResult(conversation.id, "committed", turn)

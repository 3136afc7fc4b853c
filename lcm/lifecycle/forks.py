"""Subagent conversations: prepared from a parent's context, ended, or rolled back.

A child is its own session family (the host's child session key). In ``fork``
mode it starts with the parent's current context in order: the parent's
summaries are referenced, not copied (the same ``sum_…`` rows, so ``expand``
and ``describe`` reach the parent's originals), and the parent's raw messages
in that context are copied into the child as its own messages (client id
``fork:<parent message id>``), because a conversation's messages are its own
history (see :mod:`lcm.conversations.carry_over`). In ``isolated`` mode the
child starts empty. Preparing the same child twice returns the first
preparation. Rolling back empties the child's context and archives it; ending
archives it and records why. The parent is never changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import Literal

from sqlalchemy.orm import Session

from lcm.assembly.render import message_to_provider
from lcm.compaction.repository import CompactionRepository
from lcm.content import IncomingMessage, prepare_message
from lcm.context import ContextEntry
from lcm.conversations.carry_over_repository import CarryOverRepository
from lcm.conversations.repository import ConversationRepository
from lcm.conversations.service import resolve_for_read, resolve_for_write
from lcm.db.models import ConversationFork, utcnow
from lcm.errors import Conflict, NotFound
from lcm.ingest.service import ingest_messages
from lcm.lifecycle.repository import LifecycleRepository
from lcm.secrets.service import DEFAULT_SCAN, SecretScan
from lcm.tenants.quota import UNLIMITED, StorageQuota

ForkMode = Literal["fork", "isolated"]


class ForkStatus(StrEnum):
    """A fork row's ``status``; the column stores these strings."""

    ACTIVE = "active"
    ENDED = "ended"
    ROLLED_BACK = "rolled_back"


@dataclass(frozen=True, slots=True)
class ForkResult:
    child_conversation_id: int
    parent_conversation_id: int
    mode: str
    status: str
    created: bool
    summaries_shared: int = 0
    messages_copied: int = 0


def prepare_fork(
    session: Session,
    tenant_id: str,
    child_key: str,
    child_session_id: str | None,
    parent_key: str,
    parent_session_id: str | None,
    mode: ForkMode,
    ttl_seconds: float | None,
    max_message_chars: int,
    quota: StorageQuota = UNLIMITED,
    secrets: SecretScan = DEFAULT_SCAN,
) -> ForkResult:
    """Create the child conversation from the parent's context; the caller commits.

    Copied messages are stored again: they count against ``quota``, and their
    secrets are recorded for the child as at ingest (``secrets``).
    """
    parent = resolve_for_read(session, tenant_id, parent_key, parent_session_id)
    # Locks the child row for the transaction: two racing preparations of one
    # child run one after the other and the second finds the first's fork row.
    child = resolve_for_write(session, tenant_id, child_key, child_session_id)
    if child.id == parent.id:
        raise Conflict("a conversation cannot be forked into itself")
    repo = LifecycleRepository(session)
    existing = repo.find_fork(child.id)
    if existing is not None and existing.status == ForkStatus.ACTIVE:
        return ForkResult(
            child.id, existing.parent_conversation_id, existing.mode, ForkStatus.ACTIVE, False
        )
    if existing is not None or repo.has_context(child.id):
        raise Conflict(f"session key {child_key!r} already holds a conversation")
    shared = copied = 0
    if mode == "fork":
        shared, copied = _copy_context(
            session,
            tenant_id,
            child_key,
            child_session_id,
            child.id,
            parent.id,
            max_message_chars,
            quota,
            secrets,
        )
    now = utcnow()
    repo.add_fork(
        ConversationFork(
            child_conversation_id=child.id,
            tenant_id=tenant_id,
            parent_conversation_id=parent.id,
            mode=mode,
            status=ForkStatus.ACTIVE,
            expires_at=now + timedelta(seconds=ttl_seconds) if ttl_seconds else None,
            created_at=now,
        )
    )
    return ForkResult(child.id, parent.id, mode, ForkStatus.ACTIVE, True, shared, copied)


def _copy_context(
    session: Session,
    tenant_id: str,
    child_key: str,
    child_session_id: str | None,
    child_id: int,
    parent_id: int,
    max_message_chars: int,
    quota: StorageQuota,
    secrets: SecretScan,
) -> tuple[int, int]:
    """Append the parent's context to the child in order; return (summaries, messages)."""
    entries = CompactionRepository(session).load_entries(parent_id)
    shared = copied = 0
    # Consecutive entries of one kind go in one write, in the parent's order.
    for run in _runs(entries):
        if run[0].summary is not None:
            items = [(e.summary.id, e.token_count) for e in run if e.summary is not None]
            _, last = ConversationRepository(session).advance_counters(
                child_id, seq_by=0, ordinal_by=len(items)
            )
            CarryOverRepository(session).append_summary_items(
                tenant_id, child_id, last - len(items) + 1, items
            )
            shared += len(items)
            continue
        batch = []
        for i, entry in enumerate(run):
            message = entry.message
            assert message is not None  # a run is all messages or all summaries
            provider = message_to_provider(message)
            incoming = IncomingMessage(
                provider["role"],
                provider["content"],
                f"fork:{parent_id}:{message.id}",
                message.created_at.isoformat(),
                provider=message.provider,
                model=message.model,
            )
            batch.append(prepare_message(incoming, f"parent message {i}", max_message_chars))
        copied += ingest_messages(
            session, tenant_id, child_key, child_session_id, batch, quota=quota, secrets=secrets
        ).ingested
    return shared, copied


def _runs(entries: list[ContextEntry]) -> list[list[ContextEntry]]:
    runs: list[list[ContextEntry]] = []
    for entry in entries:
        if runs and (runs[-1][0].summary is None) == (entry.summary is None):
            runs[-1].append(entry)
        else:
            runs.append([entry])
    return runs


def end_fork(
    session: Session, tenant_id: str, child_key: str, reason: str, *, rollback: bool = False
) -> ConversationFork:
    """End (or roll back) the child's fork: archive the child; the caller commits."""
    child = resolve_for_read(session, tenant_id, child_key)
    repo = LifecycleRepository(session)
    fork = repo.find_fork(child.id)
    if fork is None:
        raise NotFound(f"no subagent conversation for session key {child_key!r}")
    now = utcnow()
    if rollback:
        # Undo the preparation: the child no longer sees the parent's context.
        repo.clear_context(child.id)
        fork.status = ForkStatus.ROLLED_BACK
    elif fork.status == ForkStatus.ACTIVE:
        fork.status = ForkStatus.ENDED
    fork.ended_at = fork.ended_at or now
    fork.end_reason = reason
    repo.archive(child.id, now)
    session.flush()
    return fork

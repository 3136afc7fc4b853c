"""Compaction asked for by a client (``POST …/compact``): one use case.

The debt commits first (a wake-up leaves with that commit); then, in inline
mode, the sweep runs here (:func:`lcm.compaction.inline.compact_now`'s
chain), or the caller waits for the worker's, up to its timeout.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lcm.compaction.inline import run_inline
from lcm.compaction.jobs import CompactionJobs
from lcm.compaction.service import context_token_total, owe_compaction, wait_for_debt
from lcm.conversations.patterns import write_skip
from lcm.conversations.service import resolve_for_read
from lcm.db.engine import Transaction
from lcm.db.models import utcnow
from lcm.settings import Settings
from lcm.worker_link import WorkerLink


@dataclass(frozen=True, slots=True)
class CompactRequest:
    """What the client asked: the budget and target to compact to, how long to wait."""

    token_budget: int | None
    target_tokens: int | None
    wait_seconds: float


@dataclass(frozen=True, slots=True)
class CompactOutcome:
    """The debt's status when the wait ended (``none`` if it did not settle), and the totals."""

    conversation_id: int | None
    status: str
    tokens_before: int
    tokens_after: int


def compact_on_request(
    transaction: Transaction,
    read: Transaction,
    inline_jobs: Callable[[], CompactionJobs],
    tenant_id: str,
    session_key: str,
    effective: Settings,
    request: CompactRequest,
    link: WorkerLink,
) -> CompactOutcome:
    """Owe manual compaction of the session's conversation, then run or wait for its sweep.

    ``effective`` is the tenant's effective settings. Nothing is compacted
    for an ignored or stateless session (its status says which). The worker
    wakes the wait through ``link`` when the debt settles.
    """
    asked_at = utcnow()
    skipped = write_skip(effective, session_key)
    if skipped is not None:
        return CompactOutcome(None, skipped, 0, 0)
    mode = effective.compaction_mode
    with transaction() as session:
        conversation = resolve_for_read(session, tenant_id, session_key)
        before = context_token_total(session, conversation.id)
        owe_compaction(
            session,
            tenant_id,
            conversation.id,
            "manual",
            request.token_budget,
            request.target_tokens,
            mode=mode,
        )
    if mode == "inline":
        run_inline(inline_jobs(), conversation.id)
    timeout = min(request.wait_seconds, effective.compact_wait_max_seconds)
    woken = link.completions(effective.broker_url)
    status = wait_for_debt(read, conversation.id, asked_at, timeout, woken, link.recheck_seconds)
    with read() as fresh:
        after = context_token_total(fresh, conversation.id)
    return CompactOutcome(conversation.id, status or "none", before, after)


__all__ = ["CompactOutcome", "CompactRequest", "compact_on_request"]

"""An operator's summary surgery, asked for: rewrite a summary (or its subtree), dissolve one.

A request is checked here, stored as a ``summary_operations`` row and owed
as compaction debt (reason ``surgery``) in the caller's unit of work, so it
runs as passes of the conversation's compaction chain under the debt row's
lease (``lcm/compaction/surgery.py``): never beside a sweep, a doctor repair
or another surgery of the same conversation. Deferred mode leaves the run
to a worker (the wake-up leaves with the commit); inline mode runs the chain
here, after the commit, as the doctor's apply does.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from lcm.compaction import (
    SURGERY,
    CompactionJobs,
    SurgeryRepository,
    owe_compaction,
    run_inline,
)
from lcm.completions import Completions, debt_key
from lcm.db.engine import Transaction
from lcm.db.models import SummaryOperation
from lcm.errors import Conflict, InvalidInput, NotFound

MAX_INSTRUCTIONS_CHARS = 4_000


@dataclass(frozen=True, slots=True)
class SurgeryAsk:
    """What an operator asks for: ``action`` ``rewrite`` or ``dissolve`` on one summary."""

    summary_id: str
    action: str
    subtree: bool = False
    instructions: str | None = None


@dataclass(frozen=True, slots=True)
class OperationView:
    """An operation as a caller reads it."""

    operation_id: str
    conversation_id: int
    summary_id: str
    action: str
    subtree: bool
    status: str  # pending | done | failed
    targets: list[str]
    done: int
    error: str | None
    created_at: datetime
    finished_at: datetime | None


def view(operation: SummaryOperation) -> OperationView:
    return OperationView(
        operation.id,
        operation.conversation_id,
        operation.summary_id,
        operation.action,
        operation.subtree,
        operation.status,
        list(operation.targets),
        operation.done,
        operation.error,
        operation.created_at,
        operation.finished_at,
    )


def request_surgery(session: Session, tenant_id: str, ask: SurgeryAsk, *, mode: str) -> str:
    """Check ``ask``, store it and owe its run; the operation's id.

    Raises ``NotFound`` for a summary that is not the tenant's, and
    ``Conflict`` for a dissolve of a leaf summary (nothing to dissolve into)
    or of a summary not in the current context. The pass checks again when
    it runs: the context may change before then.
    """
    if ask.instructions is not None and len(ask.instructions) > MAX_INSTRUCTIONS_CHARS:
        raise InvalidInput(f"instructions are over {MAX_INSTRUCTIONS_CHARS} characters")
    repo = SurgeryRepository(session)
    summary = repo.summary(ask.summary_id, tenant_id)
    if summary is None:
        raise NotFound(f"summary {ask.summary_id} not found")
    if ask.action == "dissolve":
        if summary.kind == "leaf":
            raise Conflict(
                f"summary {summary.id} is a leaf: it summarizes messages, no summaries to "
                "dissolve into",
                code="leaf_summary",
            )
        if repo.context_item(summary.conversation_id, summary.id) is None:
            raise Conflict(
                f"summary {summary.id} is not in the current context", code="not_in_context"
            )
        targets = [summary.id]
    else:
        targets = repo.subtree(summary.id) if ask.subtree else [summary.id]
    operation = SummaryOperation(
        id="op_" + secrets.token_hex(8),
        tenant_id=tenant_id,
        conversation_id=summary.conversation_id,
        summary_id=summary.id,
        action=ask.action,
        subtree=ask.subtree,
        instructions=(ask.instructions or "").strip() or None,
        targets=targets,
        done=0,
        status="pending",
    )
    repo.add(operation)
    owe_compaction(session, tenant_id, summary.conversation_id, SURGERY, None, mode=mode)
    return operation.id


def perform_surgery(
    transaction: Transaction,
    inline_jobs: Callable[[], CompactionJobs],
    tenant_id: str,
    ask: SurgeryAsk,
    mode: str,
) -> OperationView:
    """Ask for ``ask`` in a unit of work of its own; in inline mode, run it here after it.

    Inline mode runs the conversation's chain in this thread; if a worker
    holds the lease, the operation waits for that worker's follow-up and
    is returned pending.
    """
    with transaction() as session:
        operation_id = request_surgery(session, tenant_id, ask, mode=mode)
        cid = get_operation(session, tenant_id, operation_id).conversation_id
    if mode == "inline":
        run_inline(inline_jobs(), cid)
    with transaction() as session:
        return get_operation(session, tenant_id, operation_id)


def get_operation(session: Session, tenant_id: str | None, operation_id: str) -> OperationView:
    """The operation (``tenant_id`` None: any tenant's, for the CLI); ``NotFound`` otherwise."""
    operation = SurgeryRepository(session).operation(operation_id, tenant_id)
    if operation is None:
        raise NotFound(f"operation {operation_id} not found")
    return view(operation)


def wait_for_operation(
    transaction: Transaction,
    tenant_id: str | None,
    operation_id: str,
    timeout: float,
    completions: Completions | None = None,
    recheck: float = 0.1,
) -> OperationView:
    """Wait until the operation is done or failed (or ``timeout`` passes); it as it then is.

    Woken by ``completions`` when the conversation's chain ends, and re-read
    every ``recheck`` seconds: the row is the answer, the wake-up only a hint.
    """
    deadline = time.monotonic() + timeout
    with transaction() as session:
        found = get_operation(session, tenant_id, operation_id)
    with (completions or Completions()).watch(debt_key(found.conversation_id)) as woken:
        while True:
            woken.clear()  # before the read: a notify after it is not lost
            with transaction() as session:
                found = get_operation(session, tenant_id, operation_id)
            left = deadline - time.monotonic()
            if found.status != "pending" or left <= 0:
                return found
            woken.wait(min(recheck, left))


__all__ = [
    "MAX_INSTRUCTIONS_CHARS",
    "OperationView",
    "SurgeryAsk",
    "get_operation",
    "perform_surgery",
    "request_surgery",
    "view",
    "wait_for_operation",
]

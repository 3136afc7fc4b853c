"""The console's write actions (a conversation's debt, a summary's surgery), each one use case.

The console signs in with a cookie, not a key, so it has no ``Caller``: the
tenant's effective settings are read here, in the action's transaction.
"""

from __future__ import annotations

from collections.abc import Callable

from lcm.compaction.inline import run_inline
from lcm.compaction.jobs import CompactionJobs
from lcm.compaction.reconcile import retry_failed_debt
from lcm.compaction.service import owe_compaction
from lcm.console.views import conversation_of
from lcm.db.engine import Transaction
from lcm.settings import Settings
from lcm.surgery import OperationView, SurgeryAsk, perform_surgery
from lcm.tenants.service import effective_settings


def owe_manual_compaction(
    transaction: Transaction,
    inline_jobs: Callable[[], CompactionJobs],
    tenant_id: str,
    conversation_id: int,
    settings: Settings,
) -> int:
    """Owe a manual compaction of the tenant's conversation (no wait); its id.

    The debt commits first; its wake-up leaves with that commit (deferred
    mode), or the sweep runs here once it is committed (inline mode).
    """
    with transaction() as session:
        conversation = conversation_of(session, tenant_id, conversation_id)
        mode = effective_settings(session, tenant_id, settings).compaction_mode
        owe_compaction(session, tenant_id, conversation.id, "manual", None, mode=mode)
    if mode == "inline":
        run_inline(inline_jobs(), conversation.id)
    return conversation.id


def retry_conversation(transaction: Transaction, tenant_id: str, conversation_id: int) -> int:
    """Re-arm the failed debt of the tenant's conversation (``lcm debt retry`` for one); its id."""
    with transaction() as session:
        conversation = conversation_of(session, tenant_id, conversation_id)
        retry_failed_debt(session, [conversation.id])
    return conversation.id


def operate_on_summary(
    transaction: Transaction,
    inline_jobs: Callable[[], CompactionJobs],
    tenant_id: str,
    ask: SurgeryAsk,
    settings: Settings,
) -> OperationView:
    """Rewrite or dissolve the tenant's summary (``POST /v1/tenant/summaries/…``, no wait).

    The operation commits first and runs as a leased pass of the
    conversation's chain: a worker's (deferred mode) or here (inline mode).
    """
    with transaction() as session:
        mode = effective_settings(session, tenant_id, settings).compaction_mode
    return perform_surgery(transaction, inline_jobs, tenant_id, ask, mode)

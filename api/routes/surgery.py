"""Summary surgery (admin): rewrite a summary or its subtree, dissolve one, poll the operation."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Path

from api.contract import SummaryDissolveIn, SummaryOperationOut, SummaryRewriteIn
from api.contract.base import Text
from api.deps import AdminCaller, Caller, DatabaseDep, ReadSessionDep, WorkerLinkDep
from api.inline_compaction import InlineJobsDep
from api.openapi import error_responses
from lcm.compaction import CompactionJobs
from lcm.db.engine import Database
from lcm.surgery import OperationView, SurgeryAsk, get_operation, perform_surgery
from lcm.surgery import wait_for_operation as wait_for
from lcm.worker_link import WorkerLink

router = APIRouter(prefix="/v1/tenant", tags=["tenant"])

NodeId = Annotated[Text, Path(min_length=1, max_length=64)]


@router.post(
    "/summaries/{summary_id}/rewrite",
    response_model=SummaryOperationOut,
    responses=error_responses(404),
)
def post_rewrite(
    summary_id: NodeId,
    body: SummaryRewriteIn,
    caller: AdminCaller,
    database: DatabaseDep,
    inline_jobs: InlineJobsDep,
    link: WorkerLinkDep,
) -> SummaryOperationOut:
    """Rewrite the summary (``subtree``: and every summary below it) as a leased job.

    The summary keeps its id, its sources and every reference to it. The
    answer is the operation: ``pending`` until a worker ran it (poll
    ``GET /v1/tenant/operations/{id}``, or ask to ``wait``).
    """
    ask = SurgeryAsk(summary_id, "rewrite", body.subtree, body.instructions)
    return _operate(ask, body.wait, caller, database, inline_jobs, link)


@router.post(
    "/summaries/{summary_id}/dissolve",
    response_model=SummaryOperationOut,
    responses=error_responses(404, 409),
)
def post_dissolve(
    summary_id: NodeId,
    body: SummaryDissolveIn,
    caller: AdminCaller,
    database: DatabaseDep,
    inline_jobs: InlineJobsDep,
    link: WorkerLinkDep,
) -> SummaryOperationOut:
    """Replace the condensed summary in the context by its sources, as a leased job.

    409 ``leaf_summary`` for a leaf (nothing to dissolve into), 409
    ``not_in_context`` for a summary the current context does not show.
    """
    ask = SurgeryAsk(summary_id, "dissolve")
    return _operate(ask, body.wait, caller, database, inline_jobs, link)


@router.get(
    "/operations/{operation_id}",
    response_model=SummaryOperationOut,
    responses=error_responses(404),
)
def get_surgery_operation(
    operation_id: NodeId, caller: AdminCaller, session: ReadSessionDep
) -> SummaryOperationOut:
    """A surgery operation of the tenant, as it is now."""
    return _out(get_operation(session, caller.tenant_id, operation_id))


def _operate(
    ask: SurgeryAsk,
    wait: bool | float,
    caller: Caller,
    database: Database,
    inline_jobs: Callable[[], CompactionJobs],
    link: WorkerLink,
) -> SummaryOperationOut:
    settings = caller.settings
    found = perform_surgery(
        database.transaction, inline_jobs, caller.tenant_id, ask, settings.compaction_mode
    )
    seconds = settings.compact_wait_seconds if wait is True else float(wait or 0)
    timeout = min(seconds, settings.compact_wait_max_seconds)
    if found.status == "pending" and timeout > 0:
        woken = link.completions(settings.broker_url)
        found = wait_for(
            database.read_session,
            caller.tenant_id,
            found.operation_id,
            timeout,
            woken,
            link.recheck_seconds,
        )
    return _out(found)


def _out(found: OperationView) -> SummaryOperationOut:
    return SummaryOperationOut.model_validate(asdict(found))

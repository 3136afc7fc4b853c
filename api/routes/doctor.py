"""The doctor (admin): a tenant's unhealthy summaries and structural problems, and repairs."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Query

from api.contract import (
    INT64_MAX,
    DoctorApplyIn,
    DoctorApplyOut,
    DoctorConversation,
    DoctorOut,
    DoctorRepairOut,
)
from api.deps import AdminCaller, DatabaseDep, ReadSessionDep
from api.inline_compaction import InlineJobsDep
from lcm.doctor.apply import apply_repairs
from lcm.doctor.service import diagnose

router = APIRouter(prefix="/v1/tenant/doctor", tags=["tenant"])


@router.get("", response_model=DoctorOut)
def get_doctor(
    caller: AdminCaller,
    session: ReadSessionDep,
    conversation_id: Annotated[int | None, Query(ge=1, le=INT64_MAX)] = None,
) -> DoctorOut:
    """Unhealthy summaries and structural problems by conversation."""
    report = diagnose(session, caller.tenant_id, conversation_id)
    totals = asdict(report)
    del totals["conversations"]
    return DoctorOut(
        conversations=[DoctorConversation(**asdict(c)) for c in report.conversations], **totals
    )


@router.post("/apply", response_model=DoctorApplyOut)
def post_doctor_apply(
    body: DoctorApplyIn,
    caller: AdminCaller,
    database: DatabaseDep,
    inline_jobs: InlineJobsDep,
) -> DoctorApplyOut:
    """Repair structural problems here; re-summarize degraded summaries with leased jobs.

    Deferred mode schedules the jobs (their wake-ups leave with the commit);
    inline mode runs them here, after the commit.
    """
    applied = apply_repairs(
        database.transaction,
        inline_jobs,
        caller.tenant_id,
        body.conversation_id,
        caller.settings.compaction_mode,
    )
    return DoctorApplyOut(
        status=applied.status,
        conversations=applied.conversations,
        repaired=[DoctorRepairOut(**asdict(r)) for r in applied.repaired],
    )

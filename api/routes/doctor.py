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
from api.deps import AdminTenant, DatabaseDep, ReadSessionDep, SettingsDep
from api.inline_compaction import InlineJobsDep
from lcm.compaction.inline import run_inline
from lcm.compaction.steps import StepAction
from lcm.doctor.service import diagnose, request_repair
from lcm.doctor.structure import repair_structure
from lcm.tenants.service import effective_settings

router = APIRouter(prefix="/v1/tenant/doctor", tags=["tenant"])


@router.get("", response_model=DoctorOut)
def get_doctor(
    tenant_id: AdminTenant,
    session: ReadSessionDep,
    conversation_id: Annotated[int | None, Query(ge=1, le=INT64_MAX)] = None,
) -> DoctorOut:
    """Unhealthy summaries and structural problems by conversation."""
    report = diagnose(session, tenant_id, conversation_id)
    totals = asdict(report)
    del totals["conversations"]
    return DoctorOut(
        conversations=[DoctorConversation(**asdict(c)) for c in report.conversations], **totals
    )


@router.post("/apply", response_model=DoctorApplyOut)
def post_doctor_apply(
    body: DoctorApplyIn,
    tenant_id: AdminTenant,
    database: DatabaseDep,
    settings: SettingsDep,
    inline_jobs: InlineJobsDep,
) -> DoctorApplyOut:
    """Repair structural problems here; re-summarize degraded summaries with leased jobs.

    Deferred mode schedules the jobs (their wake-ups leave with the commit);
    inline mode runs them here, after the commit.
    """
    with database.transaction() as session:
        fixed = repair_structure(session, tenant_id, body.conversation_id)
        mode = effective_settings(session, tenant_id, settings).compaction_mode
        owed = request_repair(session, tenant_id, body.conversation_id, mode=mode)
    repaired = [DoctorRepairOut(**asdict(r)) for r in fixed]
    if not owed:
        return DoctorApplyOut(status="none", conversations=[], repaired=repaired)
    if mode == "inline":
        reports = [run_inline(inline_jobs(), cid) for cid in owed]
        # A repair that found the LLM still down ends "retry": its debt retries later.
        if all(r is not None and r.ended == StepAction.DONE for r in reports):
            return DoctorApplyOut(status="ran", conversations=owed, repaired=repaired)
    return DoctorApplyOut(status="scheduled", conversations=owed, repaired=repaired)

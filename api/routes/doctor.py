"""The doctor (admin): a tenant's broken, truncated and degraded summaries, and their repair."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Query

from api.contract import INT64_MAX, DoctorApplyIn, DoctorApplyOut, DoctorConversation, DoctorOut
from api.deps import AdminTenant, DatabaseDep, ReadSessionDep, SettingsDep
from api.inline_compaction import InlineJobsDep
from lcm.compaction.inline import run_inline
from lcm.doctor.service import diagnose, request_repair
from lcm.tenants.service import effective_settings

router = APIRouter(prefix="/v1/tenant/doctor", tags=["tenant"])


@router.get("", response_model=DoctorOut)
def get_doctor(
    tenant_id: AdminTenant,
    session: ReadSessionDep,
    conversation_id: Annotated[int | None, Query(ge=1, le=INT64_MAX)] = None,
) -> DoctorOut:
    """Unhealthy summaries by conversation (a summary may be truncated and degraded)."""
    report = diagnose(session, tenant_id, conversation_id)
    return DoctorOut(
        conversations=[DoctorConversation(**asdict(c)) for c in report.conversations],
        broken=report.broken,
        truncated=report.truncated,
        degraded=report.degraded,
    )


@router.post("/apply", response_model=DoctorApplyOut)
def post_doctor_apply(
    body: DoctorApplyIn,
    tenant_id: AdminTenant,
    database: DatabaseDep,
    settings: SettingsDep,
    inline_jobs: InlineJobsDep,
) -> DoctorApplyOut:
    """Re-summarize degraded summaries in place: a leased job per conversation.

    Deferred mode schedules the jobs (their wake-ups leave with the commit);
    inline mode runs them here, after the commit.
    """
    with database.transaction() as session:
        mode = effective_settings(session, tenant_id, settings).compaction_mode
        owed = request_repair(session, tenant_id, body.conversation_id, mode=mode)
    if not owed:
        return DoctorApplyOut(status="none", conversations=[])
    if mode == "inline":
        reports = [run_inline(inline_jobs(), cid) for cid in owed]
        # A repair that found the LLM still down ends "retry": its debt retries later.
        if all(r is not None and r.ended == "done" for r in reports):
            return DoctorApplyOut(status="ran", conversations=owed)
    return DoctorApplyOut(status="scheduled", conversations=owed)

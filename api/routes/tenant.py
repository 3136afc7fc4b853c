"""The calling tenant itself: its settings (overrides of compaction knobs and limits), its
usage, and erasing it."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, date, datetime, time, timedelta
from typing import Annotated

from fastapi import APIRouter, Query, Response
from sqlalchemy.orm import Session

from api.contract import (
    HostUsageLineOut,
    HostUsageOut,
    TenantSettingsOut,
    UsageLineOut,
    UsageOut,
    UsagePurposeOut,
)
from api.deps import AdminCaller, DatabaseDep, ReadSessionDep, ServicesDep, SessionDep, SettingsDep
from api.openapi import error_responses
from api.schemas import TenantSettingsPatch
from lcm.erasure.service import erase_own_tenant, erase_then_release
from lcm.settings import Settings
from lcm.tenants.service import (
    OVERRIDABLE,
    effective_settings,
    stored_overrides,
    update_own_overrides,
)
from lcm.tenants.usage import usage_report

router = APIRouter(prefix="/v1/tenant", tags=["tenant"])


def _out(session: Session, tenant_id: str, effective: Settings) -> TenantSettingsOut:
    shown = effective.model_dump(include=set(OVERRIDABLE))
    return TenantSettingsOut(overrides=stored_overrides(session, tenant_id), effective=shown)


@router.get("/settings", response_model=TenantSettingsOut)
def read_settings(caller: AdminCaller, session: ReadSessionDep) -> TenantSettingsOut:
    return _out(session, caller.tenant_id, caller.settings)


@router.patch("/settings", response_model=TenantSettingsOut, responses=error_responses(403))
def patch_settings(
    changes: TenantSettingsPatch,
    caller: AdminCaller,
    session: SessionDep,
    settings: SettingsDep,
) -> TenantSettingsOut:
    """Merge overrides (``null`` removes one); validated like the process settings.

    A limit (quota, rate, budget, cap) may be lowered, not raised above the
    deployment's value or an operator's grant: 403 ``above_ceiling``.
    """
    tenant_id = caller.tenant_id
    update_own_overrides(session, tenant_id, changes.model_dump(exclude_unset=True), settings)
    # The overrides just changed: the caller's settings are read again. The
    # request's unit of work commits.
    return _out(session, tenant_id, effective_settings(session, tenant_id, settings))


USAGE_DEFAULT_DAYS = 30


@router.get("/usage", response_model=UsageOut)
def get_usage(
    caller: AdminCaller,
    session: ReadSessionDep,
    settings: SettingsDep,
    since: Annotated[
        datetime | date | None,
        Query(description="A date or timestamp (UTC when no offset); default: 30 days ago"),
    ] = None,
) -> UsageOut:
    """LLM tokens, passes and estimated cost by UTC day and model, from ``since`` on.

    ``by_purpose`` shows the same calls by purpose and provider/model;
    ``host_usage`` the host's own model tokens its turns reported.
    """
    report = usage_report(session, caller.tenant_id, _since(since), settings.model_prices)
    return UsageOut(
        since=report.since,
        usage=[UsageLineOut(**asdict(line)) for line in report.lines],
        by_purpose=[UsagePurposeOut(**asdict(line)) for line in report.by_purpose],
        input_tokens=report.input_tokens,
        output_tokens=report.output_tokens,
        passes=report.passes,
        estimated_cost_usd=report.estimated_cost_usd,
        unpriced_models=report.unpriced_models,
        host_usage=[HostUsageLineOut(**asdict(line)) for line in report.host_lines],
        host=HostUsageOut(**asdict(report.host)),
    )


def _since(value: datetime | date | None) -> datetime:
    if value is None:
        today = datetime.now(UTC).date()
        return datetime.combine(today - timedelta(days=USAGE_DEFAULT_DAYS), time(), UTC)
    if not isinstance(value, datetime):
        return datetime.combine(value, time(), UTC)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


@router.delete("", status_code=204, responses=error_responses(400))
def delete_tenant(
    caller: AdminCaller,
    database: DatabaseDep,
    services: ServicesDep,
    confirm: Annotated[str, Query(max_length=200)] = "",
) -> Response:
    """Erase the calling tenant: every conversation, file, setting and key (this one too).

    ``confirm`` must repeat the tenant's name, so a stray request cannot do it.
    """
    erase_then_release(
        database.transaction,
        database.read_session,
        services.storage,
        lambda session: erase_own_tenant(session, caller.tenant_id, confirm),
    )
    return Response(status_code=204)

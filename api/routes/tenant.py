"""The calling tenant's own settings (overrides of compaction knobs and limits) and usage."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, date, datetime, time, timedelta
from typing import Annotated

from fastapi import APIRouter, Query
from sqlalchemy.orm import Session

from api.contract import TenantSettingsOut, UsageLineOut, UsageOut
from api.deps import AdminTenant, ReadSessionDep, SessionDep, SettingsDep
from api.schemas import TenantSettingsPatch
from lcm.tenants.service import (
    OVERRIDABLE,
    effective_settings,
    stored_overrides,
    update_overrides,
)
from lcm.tenants.usage import usage_report

router = APIRouter(prefix="/v1/tenant", tags=["tenant"])


def _out(session: Session, tenant_id: str, settings: SettingsDep) -> TenantSettingsOut:
    effective = effective_settings(session, tenant_id, settings).model_dump(
        include=set(OVERRIDABLE)
    )
    return TenantSettingsOut(overrides=stored_overrides(session, tenant_id), effective=effective)


@router.get("/settings", response_model=TenantSettingsOut)
def get_settings(
    tenant_id: AdminTenant, session: ReadSessionDep, settings: SettingsDep
) -> TenantSettingsOut:
    return _out(session, tenant_id, settings)


@router.patch("/settings", response_model=TenantSettingsOut)
def patch_settings(
    changes: TenantSettingsPatch,
    tenant_id: AdminTenant,
    session: SessionDep,
    settings: SettingsDep,
) -> TenantSettingsOut:
    """Merge overrides (``null`` removes one); validated like the process settings."""
    update_overrides(session, tenant_id, changes.model_dump(exclude_unset=True))
    return _out(session, tenant_id, settings)  # the request's unit of work commits


USAGE_DEFAULT_DAYS = 30


@router.get("/usage", response_model=UsageOut)
def get_usage(
    tenant_id: AdminTenant,
    session: ReadSessionDep,
    settings: SettingsDep,
    since: Annotated[
        datetime | date | None,
        Query(description="A date or timestamp (UTC when no offset); default: 30 days ago"),
    ] = None,
) -> UsageOut:
    """LLM tokens, passes and estimated cost by UTC day and model, from ``since`` on."""
    report = usage_report(session, tenant_id, _since(since), settings.model_prices)
    return UsageOut(
        since=report.since,
        usage=[UsageLineOut(**asdict(line)) for line in report.lines],
        input_tokens=report.input_tokens,
        output_tokens=report.output_tokens,
        passes=report.passes,
        estimated_cost_usd=report.estimated_cost_usd,
        unpriced_models=report.unpriced_models,
    )


def _since(value: datetime | date | None) -> datetime:
    if value is None:
        today = datetime.now(UTC).date()
        return datetime.combine(today - timedelta(days=USAGE_DEFAULT_DAYS), time(), UTC)
    if not isinstance(value, datetime):
        return datetime.combine(value, time(), UTC)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)

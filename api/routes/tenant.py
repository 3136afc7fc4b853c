"""The calling tenant's own settings: per-tenant overrides of the compaction knobs."""

from __future__ import annotations

from fastapi import APIRouter
from sqlalchemy.orm import Session

from api.contract import TenantSettingsOut
from api.deps import AdminTenant, ReadSessionDep, SessionDep, SettingsDep
from api.schemas import TenantSettingsPatch
from lcm.tenants.service import (
    OVERRIDABLE,
    effective_settings,
    stored_overrides,
    update_overrides,
)

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

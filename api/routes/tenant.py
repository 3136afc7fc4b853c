"""The calling tenant itself: its settings (per-tenant overrides of the compaction knobs)
and erasing it."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response
from sqlalchemy.orm import Session

from api.deps import DatabaseDep, ReadSessionDep, SessionDep, SettingsDep, TenantDep
from api.openapi import error_responses
from api.schemas import TenantSettingsOut, TenantSettingsPatch
from lcm.erasure.service import erase_tenant, remove_released_blobs
from lcm.errors import InvalidInput
from lcm.files.storage import build_storage
from lcm.tenants.repository import TenantRepository
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
    tenant_id: TenantDep, session: ReadSessionDep, settings: SettingsDep
) -> TenantSettingsOut:
    return _out(session, tenant_id, settings)


@router.patch("/settings", response_model=TenantSettingsOut)
def patch_settings(
    changes: TenantSettingsPatch,
    tenant_id: TenantDep,
    session: SessionDep,
    settings: SettingsDep,
) -> TenantSettingsOut:
    """Merge overrides (``null`` removes one); validated like the process settings."""
    update_overrides(session, tenant_id, changes.model_dump(exclude_unset=True))
    return _out(session, tenant_id, settings)  # the request's unit of work commits


# Scope (once keys carry scopes): admin.
@router.delete("", status_code=204, responses=error_responses(400))
def delete_tenant(
    tenant_id: TenantDep,
    database: DatabaseDep,
    settings: SettingsDep,
    confirm: Annotated[str, Query(max_length=200)] = "",
) -> Response:
    """Erase the calling tenant: every conversation, file, setting and key (this one too).

    ``confirm`` must repeat the tenant's name, so a stray request cannot do it.
    """
    with database.transaction() as session:
        tenant = TenantRepository(session).get(tenant_id)
        if tenant is None or confirm != tenant.name:
            raise InvalidInput(
                "to erase this tenant, repeat its name in ?confirm=", code="confirm_required"
            )
        erased = erase_tenant(session, tenant_id)
    remove_released_blobs(database.read_session, build_storage(settings), erased)
    return Response(status_code=204)

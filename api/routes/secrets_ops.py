"""Operator controls of secret detection: re-scan stored history, report findings.

Admin keys only. A scan is a leased worker job (``lcm.secrets.scans``);
the POST records it and answers 202 with its progress, which the GET reads.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Query

from api.contract import (
    SecretFindingsOut,
    SecretKindOut,
    SecretScanIn,
    SecretScanOut,
    SecretsReportOut,
)
from api.contract.base import RowId
from api.deps import AdminCaller, ReadSessionDep, SessionDep
from api.openapi import error_responses
from lcm.conversations import resolve_for_read
from lcm.errors import InvalidInput
from lcm.secrets import scan_progress, secrets_report, start_scan

router = APIRouter(prefix="/v1/tenant/secrets", tags=["tenant"])


@router.post(
    "/scans",
    status_code=202,
    response_model=SecretScanOut,
    responses=error_responses(404, 409),
)
def post_scan(body: SecretScanIn, caller: AdminCaller, session: SessionDep) -> Any:
    """Re-scan stored messages with the current detector and the tenant's rules.

    409 ``secret_scan_running`` while a scan of the same scope is pending or running.
    """
    if body.conversation_id is not None and body.session_key is not None:
        raise InvalidInput("give conversation_id or session_key, not both")
    conversation_id = body.conversation_id
    if body.session_key is not None:
        conversation_id = resolve_for_read(session, caller.tenant_id, body.session_key).id
    progress = start_scan(
        session, caller.tenant_id, caller.settings, conversation_id, body.rescan_all
    )
    return asdict(progress)


@router.get("/scans/{scan_id}", response_model=SecretScanOut, responses=error_responses(404))
def get_scan(scan_id: RowId, caller: AdminCaller, session: ReadSessionDep) -> Any:
    return asdict(scan_progress(session, caller.tenant_id, scan_id))


@router.get("/report", response_model=SecretsReportOut)
def get_report(
    caller: AdminCaller,
    session: ReadSessionDep,
    conversation_id: Annotated[RowId | None, Query()] = None,
) -> SecretsReportOut:
    """Findings (stored spans) by kind for each of the tenant's conversations that has any."""
    found = secrets_report(session, caller.tenant_id, conversation_id)
    return SecretsReportOut(
        conversations=[
            SecretFindingsOut(
                conversation_id=c.conversation_id,
                session_key=c.session_key,
                spans=c.spans,
                kinds={k.kind: SecretKindOut(spans=k.spans, values=k.values) for k in c.kinds},
            )
            for c in found
        ]
    )

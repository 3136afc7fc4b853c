"""Originals of detected secrets: who read them (audit) and erasing them (admin scope).

``GET /v1/tenant/secrets/reads`` lists the audit of reads with
``with_secrets`` (newest first, paged); ``POST /v1/tenant/secrets/erase``
replaces a secret's original with its placeholder in the stored rows.
:func:`secrets_reader` is the gate the reading routes (describe, expand,
export) pass before they return originals.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated

from fastapi import APIRouter, Query

from api.contract import (
    INT64_MAX,
    SecretErasedOut,
    SecretEraseIn,
    SecretReadOut,
    SecretReadsOut,
)
from api.deps import AdminCaller, Caller, DatabaseDep, ReadSessionDep, ServicesDep
from api.openapi import error_responses
from lcm.errors import Forbidden
from lcm.secret_access import MAX_PAGE, ErasureRequest, Reader, erase_secrets, list_reads
from lcm.secrets import SecretScan

router = APIRouter(prefix="/v1/tenant/secrets", tags=["tenant"])
SECRETS_SCOPE = "secrets"


def secrets_reader(caller: Caller) -> Reader:
    """The caller as a reader of originals; 403 unless its key holds the ``secrets`` scope."""
    if SECRETS_SCOPE not in caller.scopes:
        raise Forbidden("with_secrets needs a key with the 'secrets' scope")
    return Reader(caller.tenant_id, caller.key_id, caller.settings.secrets_reads_retention_days)


@router.get("/reads", response_model=SecretReadsOut, responses=error_responses(400))
def get_secret_reads(
    caller: AdminCaller,
    session: ReadSessionDep,
    conversation_id: Annotated[int | None, Query(ge=1, le=INT64_MAX)] = None,
    key_id: Annotated[int | None, Query(ge=1, le=INT64_MAX)] = None,
    cursor: Annotated[str | None, Query(max_length=40)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
) -> SecretReadsOut:
    """Reads that returned originals, newest first; ``next_cursor`` continues."""
    page = list_reads(
        session,
        caller.tenant_id,
        conversation_id=conversation_id,
        key_id=key_id,
        cursor=cursor,
        limit=limit,
    )
    return SecretReadsOut(
        reads=[SecretReadOut(**dataclasses.asdict(r)) for r in page.reads],
        next_cursor=page.next_cursor,
    )


@router.post("/erase", response_model=SecretErasedOut, responses=error_responses(400, 404))
def post_erase(
    body: SecretEraseIn, caller: AdminCaller, database: DatabaseDep, services: ServicesDep
) -> SecretErasedOut:
    """Replace the originals with their placeholders in the stored rows, for good.

    ``span_ids``: each span's value, everywhere in its conversation;
    ``value``: that value in every conversation of the tenant. Running it
    again changes nothing.
    """
    erased = erase_secrets(
        database.transaction,
        caller.tenant_id,
        ErasureRequest(tuple(body.span_ids), body.value),
        SecretScan.of(caller.settings),
        services.storage,
    )
    return SecretErasedOut(**dataclasses.asdict(erased))

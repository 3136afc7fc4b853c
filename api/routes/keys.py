"""The calling tenant's API keys: create (shown once), list, revoke, rotate (admin scope)."""

from __future__ import annotations

import dataclasses
from typing import Annotated

from fastapi import APIRouter, Path

from api.contract import INT64_MAX, IssuedKeyOut, KeyIn, KeyList, KeyOut
from api.deps import AdminCaller, ReadSessionDep, SessionDep
from api.openapi import error_responses
from lcm.tenants.keys import (
    IssuedKey,
    KeyInfo,
    create_key,
    list_keys,
    revoke_key,
    rotate_key,
)

router = APIRouter(prefix="/v1/tenant/keys", tags=["tenant"])
KeyId = Annotated[int, Path(ge=1, le=INT64_MAX)]


def _shown(key: KeyInfo) -> KeyOut:
    return KeyOut(**dataclasses.asdict(key))


def _issued(issued: IssuedKey) -> IssuedKeyOut:
    return IssuedKeyOut(**dataclasses.asdict(issued.key), api_key=issued.api_key)


@router.get("", response_model=KeyList)
def get_keys(caller: AdminCaller, session: ReadSessionDep) -> KeyList:
    return KeyList(keys=[_shown(key) for key in list_keys(session, caller.tenant_id)])


@router.post("", response_model=IssuedKeyOut, status_code=201)
def post_key(body: KeyIn, caller: AdminCaller, session: SessionDep) -> IssuedKeyOut:
    return _issued(create_key(session, caller.tenant_id, body.name, body.scopes))


@router.post("/{key_id}/revoke", response_model=KeyOut, responses=error_responses(404))
def post_revoke(key_id: KeyId, caller: AdminCaller, session: SessionDep) -> KeyOut:
    """Refused from the key's next request on (revoking twice keeps the first time)."""
    return _shown(revoke_key(session, caller.tenant_id, key_id))


@router.post(
    "/{key_id}/rotate",
    response_model=IssuedKeyOut,
    status_code=201,
    responses=error_responses(404, 409),
)
def post_rotate(key_id: KeyId, caller: AdminCaller, session: SessionDep) -> IssuedKeyOut:
    """A new key with the same name and scopes; the old one is revoked in the same commit."""
    return _issued(rotate_key(session, caller.tenant_id, key_id))

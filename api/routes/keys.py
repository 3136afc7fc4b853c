"""The calling tenant's API keys: create (shown once), list, revoke, rotate (admin scope)."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Path
from pydantic import BaseModel, Field

from api.contract import INT64_MAX, RequestBody, Text
from api.deps import AdminTenant, ReadSessionDep, SessionDep
from api.openapi import error_responses
from lcm.tenants.keys import (
    SCOPES,
    IssuedKey,
    KeyInfo,
    Scope,
    create_key,
    list_keys,
    revoke_key,
    rotate_key,
)

router = APIRouter(prefix="/v1/tenant/keys", tags=["tenant"])
KeyId = Annotated[int, Path(ge=1, le=INT64_MAX)]


class KeyIn(RequestBody):
    name: Annotated[Text, Field(min_length=1, max_length=200)]
    scopes: Annotated[list[Scope], Field(min_length=1, max_length=len(SCOPES))] = Field(
        default_factory=lambda: list(SCOPES)
    )


class KeyOut(BaseModel):
    """A key as it may be shown: no hash, no key."""

    id: int
    name: str
    prefix: str
    scopes: list[Scope]
    created_at: datetime
    revoked_at: datetime | None

    @classmethod
    def of(cls, key: KeyInfo) -> KeyOut:
        return cls(**dataclasses.asdict(key))


class KeyList(BaseModel):
    keys: list[KeyOut]


class IssuedKeyOut(KeyOut):
    """A new key: ``api_key`` is shown this once and stored only as a hash."""

    api_key: str

    @classmethod
    def issued(cls, issued: IssuedKey) -> IssuedKeyOut:
        return cls(**dataclasses.asdict(issued.key), api_key=issued.api_key)


@router.get("", response_model=KeyList)
def get_keys(tenant_id: AdminTenant, session: ReadSessionDep) -> KeyList:
    return KeyList(keys=[KeyOut.of(key) for key in list_keys(session, tenant_id)])


@router.post("", response_model=IssuedKeyOut, status_code=201)
def post_key(body: KeyIn, tenant_id: AdminTenant, session: SessionDep) -> IssuedKeyOut:
    return IssuedKeyOut.issued(create_key(session, tenant_id, body.name, body.scopes))


@router.post("/{key_id}/revoke", response_model=KeyOut, responses=error_responses(404))
def post_revoke(key_id: KeyId, tenant_id: AdminTenant, session: SessionDep) -> KeyOut:
    """Refused from the key's next request on (revoking twice keeps the first time)."""
    return KeyOut.of(revoke_key(session, tenant_id, key_id))


@router.post(
    "/{key_id}/rotate",
    response_model=IssuedKeyOut,
    status_code=201,
    responses=error_responses(404, 409),
)
def post_rotate(key_id: KeyId, tenant_id: AdminTenant, session: SessionDep) -> IssuedKeyOut:
    """A new key with the same name and scopes; the old one is revoked in the same commit."""
    return IssuedKeyOut.issued(rotate_key(session, tenant_id, key_id))

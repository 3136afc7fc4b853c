"""Conversation endpoints: ``/v1/conversations/{key}/…``."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from api.deps import SessionDep, SettingsDep, TenantDep
from api.schemas import MessagesIn, MessagesOut
from lcm.ingest.service import ingest_messages, prepare_batch

router = APIRouter(prefix="/v1/conversations", tags=["conversations"])

SessionKey = Annotated[str, Path(min_length=1, max_length=512)]


@router.post("/{key:path}/messages", response_model=MessagesOut)
def post_messages(
    key: SessionKey,
    body: MessagesIn,
    tenant_id: TenantDep,
    session: SessionDep,
    settings: SettingsDep,
) -> MessagesOut:
    batch = prepare_batch(
        [m.to_domain() for m in body.messages],
        max_batch=settings.max_batch_messages,
        max_chars=settings.max_message_chars,
    )
    result = ingest_messages(session, tenant_id, key, body.session_id, batch)
    session.commit()
    return MessagesOut(
        conversation_id=result.conversation_id,
        ingested=result.ingested,
        duplicates=result.duplicates,
    )

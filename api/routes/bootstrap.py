"""``POST /v1/conversations/{key}/bootstrap``: reconcile a gateway's JSONL transcript."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path
from pydantic import BaseModel, Field

from api.deps import DatabaseDep, SettingsDep, TenantDep
from api.file_jobs import FileJobsDep
from lcm.tenants.service import effective_settings
from lcm.transcripts.service import BootstrapOptions, bootstrap_transcript

router = APIRouter(prefix="/v1/conversations", tags=["transcripts"])

SessionKey = Annotated[str, Path(min_length=1, max_length=512)]


class BootstrapIn(BaseModel):
    transcript_jsonl: str
    session_id: str | None = Field(None, min_length=1, max_length=200)
    format: Literal["auto", "openclaw", "claude-code"] = "auto"


class BootstrapOut(BaseModel):
    conversation_id: int
    imported: int
    anchor_seq: int | None
    anchor: str  # checkpoint | id | content | none (bounded import) | empty (first import)
    duplicates: int
    format: str
    file_ids: list[str]


@router.post("/{key:path}/bootstrap", response_model=BootstrapOut)
def post_bootstrap(
    key: SessionKey,
    body: BootstrapIn,
    tenant_id: TenantDep,
    database: DatabaseDep,
    settings: SettingsDep,
    file_jobs: FileJobsDep,
) -> BootstrapOut:
    with database.read_session() as session:
        effective = effective_settings(session, tenant_id, settings)
    options = BootstrapOptions.from_settings(effective, body.format)
    transcript = body.transcript_jsonl.encode("utf-8", "replace")
    # Commits chunk by chunk (short write transactions; see the service).
    result = bootstrap_transcript(
        database.transaction, tenant_id, key, body.session_id, transcript, options
    )
    if result.file_ids:
        file_jobs(result.file_ids)  # after the commits: the rows exist when a worker looks
    return BootstrapOut(
        conversation_id=result.conversation_id,
        imported=result.imported,
        anchor_seq=result.anchor_seq,
        anchor=result.anchor,
        duplicates=result.duplicates,
        format=result.format,
        file_ids=list(result.file_ids),
    )

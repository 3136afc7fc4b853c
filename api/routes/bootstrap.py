"""``POST /v1/conversations/{key}/bootstrap``: reconcile a gateway's JSONL transcript."""

from __future__ import annotations

from fastapi import APIRouter

from api.contract import BootstrapIn, BootstrapOut
from api.deps import DatabaseDep, IngestCaller, ServicesDep, SettingsDep
from api.openapi import error_responses
from api.validation import SessionKey
from lcm.conversations.patterns import write_skip
from lcm.tenants.service import effective_settings
from lcm.transcripts.service import BootstrapOptions, bootstrap_transcript

router = APIRouter(prefix="/v1/conversations", tags=["transcripts"])


@router.post("/{key:path}/bootstrap", response_model=BootstrapOut, responses=error_responses(409))
def post_bootstrap(
    key: SessionKey,
    body: BootstrapIn,
    caller: IngestCaller,
    database: DatabaseDep,
    settings: SettingsDep,
    services: ServicesDep,
) -> BootstrapOut:
    with database.read_session() as session:
        effective = effective_settings(session, caller.tenant_id, settings)
    skipped = write_skip(effective, key)
    if skipped is not None:
        return BootstrapOut(
            conversation_id=None,
            imported=0,
            anchor_seq=None,
            anchor="none",
            duplicates=0,
            format=body.format,
            file_ids=[],
            **BootstrapOut.flags(skipped),
        )
    options = BootstrapOptions.from_settings(effective, services.storage, body.format)
    transcript = body.transcript_jsonl.encode()  # storable text: no surrogate left to fail
    # Commits chunk by chunk (short write transactions; see the service); each
    # chunk's file-summary jobs leave with its commit.
    result = bootstrap_transcript(
        database.transaction, caller.tenant_id, key, body.session_id, transcript, options
    )
    return BootstrapOut(
        conversation_id=result.conversation_id,
        imported=result.imported,
        anchor_seq=result.anchor_seq,
        anchor=result.anchor,
        duplicates=result.duplicates,
        format=result.format,
        file_ids=list(result.file_ids),
    )

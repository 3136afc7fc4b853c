"""``POST /v1/conversations/{key}/bootstrap``: reconcile a gateway's JSONL transcript."""

from __future__ import annotations

from fastapi import APIRouter

from api.contract import BootstrapIn, BootstrapOut
from api.deps import DatabaseDep, IngestCaller, ServicesDep
from api.heavy_work import HEAVY_INGEST_WRITE
from api.openapi import error_responses
from api.validation import SessionKey
from lcm.address import SessionAddress
from lcm.transcripts.service import bootstrap_session

router = APIRouter(prefix="/v1/conversations", tags=["transcripts"])


@router.post(
    "/{key:path}/bootstrap",
    response_model=BootstrapOut,
    responses=error_responses(409, 429),
    dependencies=[HEAVY_INGEST_WRITE],
)
def post_bootstrap(
    key: SessionKey,
    body: BootstrapIn,
    caller: IngestCaller,
    database: DatabaseDep,
    services: ServicesDep,
) -> BootstrapOut:
    # Commits chunk by chunk (short write transactions; see the service); each
    # chunk's file-summary jobs leave with its commit.
    result = bootstrap_session(
        database.transaction,
        SessionAddress(caller.tenant_id, key, body.session_id),
        body.transcript_jsonl.encode(),  # storable text: no surrogate left to fail
        caller.settings,
        services.storage,
        body.format,
    )
    if isinstance(result, str):  # an ignored or stateless session: nothing imported
        return BootstrapOut(
            conversation_id=None,
            imported=0,
            anchor_seq=None,
            anchor="none",
            duplicates=0,
            format=body.format,
            file_ids=[],
            **BootstrapOut.flags(result),
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

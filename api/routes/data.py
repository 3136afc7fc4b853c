"""A tenant's data: list conversations, erase them, export one as JSONL, import it back.

``GET /v1/conversations`` lists (newest first, cursor pages);
``DELETE /v1/conversations/{key}`` erases the session family (or one of its
conversations with ``?session_id=`` or ``?conversation_id=``);
``GET …/{key}/export`` streams a conversation as JSONL and
``POST …/{key}/import`` writes such a file into a new or empty conversation.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from api.contract import ConversationItemOut, ConversationListOut, ImportOut, SessionIdText
from api.deps import AdminCaller, DatabaseDep, ReadCaller, ReadSessionDep, ServicesDep
from api.heavy_work import HEAVY_ADMIN_READ, HEAVY_ADMIN_WRITE
from api.openapi import error_responses
from api.routes.secrets_access import secrets_reader
from api.validation import SessionKey
from lcm.address import SessionAddress
from lcm.conversations.listing import list_conversations
from lcm.conversations.service import conversation_in_family, resolve_for_read
from lcm.db.engine import Database
from lcm.erasure.service import erase_in_family, erase_then_release
from lcm.errors import InvalidInput
from lcm.files.storage import FileStorage
from lcm.secret_access import record_export
from lcm.secrets.service import SecretScan
from lcm.tenants.quota import StorageQuota
from lcm.transfer.export import export_lines
from lcm.transfer.service import import_export, parse_export

router = APIRouter(prefix="/v1/conversations", tags=["data"])

ConversationIdQuery = Annotated[int | None, Query(ge=1, le=2**63 - 1)]


@router.get("", response_model=ConversationListOut, responses=error_responses(400))
def get_conversations(
    caller: ReadCaller,
    session: ReadSessionDep,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=200)] = None,
    prefix: Annotated[str | None, Query(max_length=512)] = None,
    archived: bool | None = None,
    updated_since: datetime | None = None,
) -> ConversationListOut:
    if updated_since is not None and updated_since.tzinfo is None:
        raise InvalidInput("updated_since needs a time zone (e.g. 2026-01-01T00:00:00Z)")
    page = list_conversations(
        session,
        caller.tenant_id,
        limit=limit,
        cursor=cursor,
        key_prefix=prefix,
        archived=archived,
        updated_since=updated_since,
    )
    return ConversationListOut(
        conversations=[ConversationItemOut(**vars(c)) for c in page.conversations],
        next_cursor=page.next_cursor,
    )


@router.delete("/{key:path}", status_code=204, responses=error_responses(404, 409))
def delete_conversations(
    key: SessionKey,
    caller: AdminCaller,
    database: DatabaseDep,
    services: ServicesDep,
    session_id: Annotated[SessionIdText | None, Query()] = None,
    conversation_id: ConversationIdQuery = None,
) -> Response:
    """Erase the family, or one conversation of it; stored file contents go after commit."""
    erase_then_release(
        database.transaction,
        database.read_session,
        services.storage,
        lambda session: erase_in_family(
            session, caller.tenant_id, key, session_id, conversation_id
        ),
    )
    return Response(status_code=204)


@router.get(
    "/{key:path}/export",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/x-ndjson": {}}}, **error_responses(404, 429)},
    dependencies=[HEAVY_ADMIN_READ],
)
def get_export(
    key: SessionKey,
    caller: AdminCaller,
    session: ReadSessionDep,
    database: DatabaseDep,
    services: ServicesDep,
    session_id: Annotated[SessionIdText | None, Query()] = None,
    conversation_id: ConversationIdQuery = None,
    with_secrets: Annotated[bool, Query()] = False,
) -> StreamingResponse:
    """The conversation (default: the family's latest) as JSONL, streamed.

    Detected secrets are written as placeholders unless ``with_secrets``
    (a key with the ``secrets`` scope too; the read is recorded first) or the
    tenant unmasked its ``export`` surface (then nothing is recorded: the
    operator chose to send originals).
    """
    reader = secrets_reader(caller) if with_secrets else None
    with_secrets = with_secrets or not caller.settings.masks_secrets("export")
    if session_id is None and conversation_id is None:
        target = resolve_for_read(session, caller.tenant_id, key)
    else:
        target = conversation_in_family(session, caller.tenant_id, key, session_id, conversation_id)
    if reader is not None:
        with database.transaction() as audited:
            record_export(audited, reader, target.id)
    return StreamingResponse(
        _stream(database, services.storage, caller.tenant_id, target.id, with_secrets),
        media_type="application/x-ndjson",
    )


def _stream(
    database: Database,
    storage: FileStorage,
    tenant_id: str,
    conversation_id: int,
    with_secrets: bool,
) -> Iterator[str]:
    # Its own session: the response streams after the route's session closed.
    with database.snapshot_session() as session:
        yield from export_lines(
            session, storage, tenant_id, conversation_id, with_secrets=with_secrets
        )


@router.post(
    "/{key:path}/import",
    response_model=ImportOut,
    responses=error_responses(400, 409, 429),
    dependencies=[HEAVY_ADMIN_WRITE],
)
async def post_import(
    key: SessionKey,
    request: Request,
    caller: AdminCaller,
    database: DatabaseDep,
    services: ServicesDep,
    session_id: Annotated[SessionIdText | None, Query()] = None,
) -> ImportOut:
    """Write an export (the JSONL body) into a new or empty conversation of ``key``.

    ``session_id`` defaults to the exported conversation's.
    """
    try:
        lines = (await request.body()).decode("utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise InvalidInput("the body is not UTF-8 JSONL") from exc
    export = parse_export(lines, max_message_chars=services.settings.max_message_chars)
    target_session = session_id if session_id is not None else export.conversation.session_id
    storage = services.storage

    def write() -> ImportOut:
        imported = import_export(
            database.transaction,
            storage,
            SessionAddress(caller.tenant_id, key, target_session),
            export,
            StorageQuota.of(caller.settings),
            SecretScan.of(caller.settings),
        )
        return ImportOut(**vars(imported))

    # The body had to be awaited; the database work must not block the event loop.
    return await run_in_threadpool(write)

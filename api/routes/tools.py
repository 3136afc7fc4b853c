"""Agent tools over HTTP: grep, describe, expand, expand-query (docs/design.md §4, §5)."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query

from api.contract import (
    INT64_MAX,
    ExpandIn,
    ExpandQueryAnswer,
    ExpandQueryIn,
    Expansion,
    FileDescription,
    GrepIn,
    GrepResult,
    SummaryDescription,
    Text,
)
from api.deps import (
    DatabaseDep,
    ReadCaller,
    ReadSessionDep,
    ServicesDep,
    SettingsDep,
    WorkerLinkDep,
)
from api.heavy_work import HEAVY_READ
from api.openapi import error_responses
from api.routes.secrets_access import secrets_reader
from api.schemas import expand_query_request, grep_query, scope_selector
from lcm.errors import InvalidInput
from lcm.retrieval.agent_tools import to_jsonable
from lcm.retrieval.describe import (
    DEFAULT_FILE_PAGE_CHARS,
    MAX_FILE_PAGE_CHARS,
    describe_file,
    describe_summary,
    file_content_page,
)
from lcm.retrieval.expand import expand, with_sources
from lcm.retrieval.expansion import ExpansionCaller, ask_expand_query, grep_limits
from lcm.retrieval.file_grep import grep_large_files
from lcm.retrieval.grep import grep
from lcm.retrieval.scope import resolve_bounds
from lcm.secret_access import expand_with_secrets, file_with_secrets, summary_with_secrets

router = APIRouter(prefix="/v1", tags=["tools"])
NodeId = Annotated[Text, Path(min_length=1, max_length=64)]
# Originals instead of placeholders: the key needs the ``secrets`` scope, and
# the read is recorded in its transaction (lcm.secret_access).
WithSecrets = Annotated[bool, Query()]


@router.post(
    "/grep",
    response_model=GrepResult,
    responses=error_responses(404, 429),
    dependencies=[HEAVY_READ],
)
def post_grep(
    body: GrepIn,
    caller: ReadCaller,
    session: ReadSessionDep,
    services: ServicesDep,
) -> Any:
    bounds = resolve_bounds(
        session, caller.tenant_id, scope_selector(body), body.since, body.before
    )
    query = grep_query(body)
    # The tenant's limits: its semantic query handling and its grep masking surface.
    mask = caller.settings.masks_secrets("grep")
    limits = dataclasses.replace(grep_limits(caller.settings), mask_secrets=mask)
    if body.scope == "files":
        return to_jsonable(grep_large_files(session, services.storage, bounds, query, limits))
    result = grep(session, bounds, query, limits)
    if body.expand_sources is not None:
        if body.expand_sources > caller.settings.expand_token_cap_max:
            raise InvalidInput(f"expand_sources is at most {caller.settings.expand_token_cap_max}")
        cap, allowed = body.expand_sources, bounds.conversation_ids
        result = with_sources(session, caller.tenant_id, result, cap, allowed)
    return to_jsonable(result)


@router.get(
    "/summaries/{summary_id}", response_model=SummaryDescription, responses=error_responses(404)
)
def get_summary(
    summary_id: NodeId,
    caller: ReadCaller,
    session: ReadSessionDep,
    database: DatabaseDep,
    with_secrets: WithSecrets = False,
) -> Any:
    if with_secrets:
        reader = secrets_reader(caller)
        with database.transaction() as audited:
            return to_jsonable(summary_with_secrets(audited, reader, summary_id))
    mask = caller.settings.masks_secrets("describe")
    return to_jsonable(describe_summary(session, caller.tenant_id, summary_id, mask=mask))


@router.get("/files/{file_id}", response_model=FileDescription, responses=error_responses(404))
def get_file(
    file_id: NodeId,
    caller: ReadCaller,
    session: ReadSessionDep,
    services: ServicesDep,
    offset: Annotated[int, Query(ge=0, le=INT64_MAX)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_FILE_PAGE_CHARS)] = DEFAULT_FILE_PAGE_CHARS,
    with_secrets: WithSecrets = False,
) -> Any:
    """The file's description and its text from character ``offset``.

    ``content.next_offset`` is where the next page starts (null at the end).
    """
    if with_secrets:
        reader = secrets_reader(caller)
        with services.database.transaction() as audited:
            found = file_with_secrets(audited, services.storage, reader, file_id, offset, limit)
            return to_jsonable(found)
    mask = caller.settings.masks_secrets("describe")
    described = describe_file(session, caller.tenant_id, file_id, mask=mask)
    page = file_content_page(
        session, services.storage, caller.tenant_id, file_id, offset, limit, mask=mask
    )
    return to_jsonable(dataclasses.replace(described, content=page))


@router.post("/expand", response_model=Expansion, responses=error_responses(404))
def post_expand(
    body: ExpandIn,
    caller: ReadCaller,
    session: ReadSessionDep,
    settings: SettingsDep,
    database: DatabaseDep,
    with_secrets: WithSecrets = False,
) -> Any:
    cap = body.token_cap or settings.max_expand_tokens
    if cap > settings.expand_token_cap_max:
        raise InvalidInput(f"token_cap is at most {settings.expand_token_cap_max}")
    if with_secrets:
        reader = secrets_reader(caller)
        with database.transaction() as audited:
            return to_jsonable(expand_with_secrets(audited, reader, body.summary_ids, cap))
    mask = caller.settings.masks_secrets("describe")  # describe and expand: one surface
    return to_jsonable(expand(session, caller.tenant_id, body.summary_ids, cap, mask=mask))


@router.post(
    "/expand-query", response_model=ExpandQueryAnswer, responses=error_responses(404, 409, 429)
)
def post_expand_query(
    body: ExpandQueryIn, caller: ReadCaller, database: DatabaseDep, link: WorkerLinkDep
) -> Any:
    """Answer a question from the history; 409 ``expansion_busy`` while the session has one."""
    asker = ExpansionCaller(caller.tenant_id, caller.settings, caller.key_id)
    request = expand_query_request(body)
    return ask_expand_query(database.transaction, asker, scope_selector(body), request, link)

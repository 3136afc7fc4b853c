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
from lcm.retrieval.expand import expand
from lcm.retrieval.expansion import ExpansionCaller, ask_expand_query, grep_limits
from lcm.retrieval.file_grep import grep_large_files
from lcm.retrieval.grep import grep
from lcm.retrieval.scope import resolve_bounds

router = APIRouter(prefix="/v1", tags=["tools"])
NodeId = Annotated[Text, Path(min_length=1, max_length=64)]


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
    limits = grep_limits(caller.settings)  # the tenant's: its semantic query handling
    if body.scope == "files":
        return to_jsonable(grep_large_files(session, services.storage, bounds, query, limits))
    return to_jsonable(grep(session, bounds, query, limits))


@router.get(
    "/summaries/{summary_id}", response_model=SummaryDescription, responses=error_responses(404)
)
def get_summary(summary_id: NodeId, caller: ReadCaller, session: ReadSessionDep) -> Any:
    return to_jsonable(describe_summary(session, caller.tenant_id, summary_id))


@router.get("/files/{file_id}", response_model=FileDescription, responses=error_responses(404))
def get_file(
    file_id: NodeId,
    caller: ReadCaller,
    session: ReadSessionDep,
    services: ServicesDep,
    offset: Annotated[int, Query(ge=0, le=INT64_MAX)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_FILE_PAGE_CHARS)] = DEFAULT_FILE_PAGE_CHARS,
) -> Any:
    """The file's description and its text from character ``offset``.

    ``content.next_offset`` is where the next page starts (null at the end).
    """
    described = describe_file(session, caller.tenant_id, file_id)
    page = file_content_page(session, services.storage, caller.tenant_id, file_id, offset, limit)
    return to_jsonable(dataclasses.replace(described, content=page))


@router.post("/expand", response_model=Expansion, responses=error_responses(404))
def post_expand(
    body: ExpandIn, caller: ReadCaller, session: ReadSessionDep, settings: SettingsDep
) -> Any:
    cap = body.token_cap or settings.max_expand_tokens
    if cap > settings.expand_token_cap_max:
        raise InvalidInput(f"token_cap is at most {settings.expand_token_cap_max}")
    return to_jsonable(expand(session, caller.tenant_id, body.summary_ids, cap))


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

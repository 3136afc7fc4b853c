"""Agent tools over HTTP: grep, describe, expand, expand-query (DESIGN §4, §5)."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query
from pydantic import Field

from api.deps import DatabaseDep, ReadSessionDep, ReadTenant, SettingsDep
from api.openapi import error_responses
from api.validation import INT64_MAX, RequestBody, RowId, Text, Tokens, UtcDatetime
from lcm.errors import DependencyUnavailable, InvalidInput
from lcm.files.storage import build_storage
from lcm.retrieval.agent_tools import to_jsonable
from lcm.retrieval.answers import ExpandQueryAnswer, ExpandQueryRequest
from lcm.retrieval.describe import (
    DEFAULT_FILE_PAGE_CHARS,
    MAX_FILE_PAGE_CHARS,
    FileDescription,
    SummaryDescription,
    describe_file,
    describe_summary,
    file_content_page,
)
from lcm.retrieval.expand import MAX_SUMMARY_IDS, Expansion, expand
from lcm.retrieval.expansion import abandon_expand_query, grep_limits, start_expand_query
from lcm.retrieval.file_grep import grep_large_files
from lcm.retrieval.grep import MAX_LIMIT, GrepQuery, GrepResult, grep
from lcm.retrieval.scope import ScopeSelector, resolve_bounds

router = APIRouter(prefix="/v1", tags=["tools"])
NodeId = Annotated[Text, Path(min_length=1, max_length=64)]


class ScopeIn(RequestBody):
    session_key: Annotated[Text, Field(min_length=1, max_length=512)] | None = None
    conversation_id: RowId | None = None
    all_conversations: bool = False

    def selector(self) -> ScopeSelector:
        return ScopeSelector(self.session_key, self.conversation_id, self.all_conversations)


class GrepIn(ScopeIn):
    pattern: Annotated[Text, Field(min_length=1)]
    mode: Literal["regex", "full_text"] = "regex"
    scope: Literal["messages", "summaries", "both", "files"] = "both"
    sort: Literal["recency", "relevance", "hybrid"] = "recency"
    limit: int = Field(50, ge=1, le=MAX_LIMIT)
    since: UtcDatetime | None = None
    before: UtcDatetime | None = None


NodeIds = Annotated[
    list[Annotated[Text, Field(min_length=1, max_length=64)]], Field(max_length=MAX_SUMMARY_IDS)
]


class ExpandIn(RequestBody):
    summary_ids: Annotated[NodeIds, Field(min_length=1)]
    token_cap: Tokens | None = None


class ExpandQueryIn(ScopeIn):
    prompt: Annotated[Text, Field(min_length=1, max_length=20_000)]
    query: Annotated[Text, Field(min_length=1, max_length=2_000)] | None = None
    summary_ids: NodeIds = Field(default_factory=list)
    max_tokens: int = Field(2_000, ge=1, le=16_000)

    def to_domain(self) -> ExpandQueryRequest:
        return ExpandQueryRequest(self.prompt, self.query, tuple(self.summary_ids), self.max_tokens)


@router.post("/grep", response_model=GrepResult, responses=error_responses(404))
def post_grep(
    body: GrepIn, tenant_id: ReadTenant, session: ReadSessionDep, settings: SettingsDep
) -> Any:
    bounds = resolve_bounds(session, tenant_id, body.selector(), body.since, body.before)
    query = GrepQuery(body.pattern, body.mode, body.scope, body.sort, body.limit)
    if body.scope == "files":
        storage = build_storage(settings)
        return to_jsonable(grep_large_files(session, storage, bounds, query, grep_limits(settings)))
    return to_jsonable(grep(session, bounds, query, grep_limits(settings)))


@router.get(
    "/summaries/{summary_id}", response_model=SummaryDescription, responses=error_responses(404)
)
def get_summary(summary_id: NodeId, tenant_id: ReadTenant, session: ReadSessionDep) -> Any:
    return to_jsonable(describe_summary(session, tenant_id, summary_id))


@router.get("/files/{file_id}", response_model=FileDescription, responses=error_responses(404))
def get_file(
    file_id: NodeId,
    tenant_id: ReadTenant,
    session: ReadSessionDep,
    settings: SettingsDep,
    offset: Annotated[int, Query(ge=0, le=INT64_MAX)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_FILE_PAGE_CHARS)] = DEFAULT_FILE_PAGE_CHARS,
) -> Any:
    """The file's description and its text from character ``offset``.

    ``content.next_offset`` is where the next page starts (null at the end).
    """
    described = describe_file(session, tenant_id, file_id)
    page = file_content_page(session, build_storage(settings), tenant_id, file_id, offset, limit)
    return to_jsonable(dataclasses.replace(described, content=page))


@router.post("/expand", response_model=Expansion, responses=error_responses(404))
def post_expand(
    body: ExpandIn, tenant_id: ReadTenant, session: ReadSessionDep, settings: SettingsDep
) -> Any:
    cap = body.token_cap or settings.max_expand_tokens
    if cap > settings.expand_token_cap_max:
        raise InvalidInput(f"token_cap is at most {settings.expand_token_cap_max}")
    return to_jsonable(expand(session, tenant_id, body.summary_ids, cap))


@router.post("/expand-query", response_model=ExpandQueryAnswer, responses=error_responses(404))
def post_expand_query(
    body: ExpandQueryIn,
    tenant_id: ReadTenant,
    settings: SettingsDep,
    database: DatabaseDep,
) -> Any:
    from workers.tasks.expansion import submit_and_wait

    request = body.to_domain()
    with database.transaction() as session:  # the worker must find the grant committed
        grant = start_expand_query(session, tenant_id, body.selector(), request, settings)
    try:
        return submit_and_wait(
            grant.id, tenant_id, to_jsonable(request), settings.expand_query_timeout_seconds
        )
    except DependencyUnavailable:
        abandon_expand_query(database.transaction, grant.id)  # a late loop stops reading
        raise

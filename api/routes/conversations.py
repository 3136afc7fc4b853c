"""Conversation endpoints: ``/v1/conversations/{key}/…`` (``{key}`` may hold slashes)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from api.contract import (
    AssembleIn,
    AssembleOut,
    CompactIn,
    CompactOut,
    ConversationStatus,
    HostCursorOut,
    MessagesIn,
    MessagesOut,
    MessageTimes,
    RecalledSnippet,
    SessionIdText,
    TurnIn,
    TurnOut,
)
from api.deps import (
    DatabaseDep,
    IngestCaller,
    IngestKey,
    ReadCaller,
    ReadSessionDep,
    ServicesDep,
    SettingsDep,
    SnapshotReadDep,
    WorkerLinkDep,
)
from api.direct_routes import (
    DirectRoute,
    direct,
    ingest_arguments,
    snapshot_arguments,
    turn_arguments,
)
from api.inline_compaction import InlineJobsDep
from api.openapi import error_responses
from api.responses import model_response, model_response_with_json
from api.schemas import prepared_batch
from api.validation import SessionKey
from lcm.address import SessionAddress
from lcm.assembly import AssembledContext, ReplayTarget, TimeSpan
from lcm.assembly.service import assemble
from lcm.conversations.compact import CompactRequest, compact_on_request
from lcm.conversations.host_cursor import read_host_cursor
from lcm.conversations.service import resolve_for_read, target_for_assembly
from lcm.ingest.turns import store_messages
from lcm.lifecycle.gateway import TurnInput, take_turn
from lcm.lifecycle.recall import recall_prompt
from lcm.policy.overrides import ModelInfo, settings_for_call
from lcm.retrieval import prompt_cue_for
from lcm.status.service import conversation_status

router = APIRouter(prefix="/v1/conversations", tags=["conversations"])
# The three calls of a gateway turn, in a router of their own that the app
# includes first: a request is matched against the routes in order, twice
# (to choose the router, then the route in it), and these paths then meet
# four path patterns instead of every one of the API's. No other route's
# pattern matches a POST to a path ending in /messages, /turns or /assemble,
# so no request is routed differently.
# Its routes are DirectRoutes: the ordinary request skips FastAPI's generic
# handling (api/direct_routes.py).
turn_router = APIRouter(prefix="/v1/conversations", tags=["conversations"], route_class=DirectRoute)


@turn_router.post(
    "/{key:path}/messages", response_model=MessagesOut, responses=error_responses(409)
)
@direct(MessagesIn, ingest_arguments)
def post_messages(
    key: SessionKey,
    body: MessagesIn,
    check: IngestKey,
    database: DatabaseDep,
    settings: SettingsDep,
    services: ServicesDep,
) -> Response:
    caller = check.caller()
    batch = prepared_batch(body, settings)
    # The use case opens its unit of work rather than a session dependency: a
    # generator dependency costs two more thread-pool hops per request (enter
    # and exit), and this is the hottest write route. It commits (and sends
    # its jobs) before the response, as the dependency's would.
    result = store_messages(
        database.transaction,
        SessionAddress(caller.tenant_id, key, body.session_id),
        batch,
        caller.settings,
        services.storage,
        body.host_cursor,
    )
    if isinstance(result, str):  # an ignored or stateless session: nothing stored
        return model_response(
            MessagesOut(conversation_id=None, ingested=0, duplicates=0, **MessagesOut.flags(result))
        )
    # Validated as it is built: not validated again (see model_response).
    return model_response(
        MessagesOut(
            conversation_id=result.conversation_id,
            ingested=result.ingested,
            duplicates=result.duplicates,
        )
    )


@turn_router.post("/{key:path}/turns", response_model=TurnOut, responses=error_responses(409))
@direct(TurnIn, turn_arguments)
def post_turn(
    key: SessionKey,
    body: TurnIn,
    check: IngestKey,
    database: DatabaseDep,
    settings: SettingsDep,
    services: ServicesDep,
    inline_jobs: InlineJobsDep,
) -> Response:
    caller = check.caller()
    batch = prepared_batch(body, settings)
    # Messages and debt commit first (the wake-up leaves with that commit);
    # inline mode then runs the sweep over the committed turn.
    taken = take_turn(
        database.transaction,
        database.read_session,
        inline_jobs,
        SessionAddress(caller.tenant_id, key, body.session_id),
        batch,
        TurnInput(
            body.token_budget,
            ModelInfo(body.model, body.context_window),
            body.live_prompt(),
        ),
        caller.settings,
        services.storage,
    )
    # Validated as it is built: not validated again (see model_response).
    if taken.turn.ingest is None:
        return model_response(TurnOut.of(taken.turn, "none"))
    if taken.compaction != "ran":
        return model_response(TurnOut.of(taken.turn, taken.compaction))
    return model_response(TurnOut.of(taken.turn, taken.compaction, taken.tokens_after))


@turn_router.post(
    "/{key:path}/assemble", response_model=AssembleOut, responses=error_responses(404)
)
@direct(AssembleIn, snapshot_arguments)
def post_assemble(key: SessionKey, body: AssembleIn, read: SnapshotReadDep) -> Response:
    with read as (session, caller):  # opened and ended in this thread (see SnapshotRead)
        conversation, stamp_read = target_for_assembly(
            session, caller.tenant_id, key, body.session_id
        )
        effective = settings_for_call(
            caller.settings, conversation, ModelInfo(body.model, body.context_window)
        )
        budget = effective.capped_budget(body.token_budget)
        cue = prompt_cue_for(session, caller.tenant_id, conversation.id, body.prompt, effective)
        result = assemble(
            session,
            conversation.id,
            budget,
            effective,
            times=body.include_times,
            replay_to=ReplayTarget(body.provider, body.model),
            cue=cue,
            tenant_id=caller.tenant_id,
            stamp_read=stamp_read,
        )
    tools = frozenset(body.available_tools) if body.available_tools is not None else None
    # Built from the domain's typed result: not validated again (see model_response);
    # its messages as the result encoded them (once per memoized context).
    return model_response_with_json(
        AssembleOut.model_construct(
            conversation_id=conversation.id,
            token_budget=budget,
            messages=[],
            estimated_tokens=result.estimated_tokens,
            summary_count=result.summary_count,
            fresh_tail_count=result.fresh_tail_count,
            fresh_tail_overflow=result.fresh_tail_overflow,
            system_prompt_addition=recall_prompt(result.summary_count, tools, body.tool_caller)
            if body.system_prompt
            else None,
            message_times=_message_times(result.message_spans()) if body.include_times else None,
            recalled=_recalled(result),
        ),
        "messages",
        result.messages_json(),
    )


def _recalled(result: AssembledContext) -> list[RecalledSnippet]:
    index = result.recalled_index
    if index is None:
        return []
    return [
        RecalledSnippet.model_construct(
            message_id=s.message_id,
            ref=s.ref,
            seq=s.seq,
            role=s.role,
            identifier=s.identifier,
            text=s.text,
            message_index=index,
            similarity=s.similarity,
        )
        for s in result.recalled
    ]


def _message_times(spans: list[TimeSpan]) -> list[MessageTimes]:
    return [
        MessageTimes.model_construct(created_at=latest, earliest_at=earliest, latest_at=latest)
        for earliest, latest in spans
    ]


@router.post("/{key:path}/compact", response_model=CompactOut, responses=error_responses(404))
def post_compact(
    key: SessionKey,
    body: CompactIn,
    caller: IngestCaller,
    database: DatabaseDep,
    inline_jobs: InlineJobsDep,
    link: WorkerLinkDep,
) -> CompactOut:
    settings = caller.settings
    wait = settings.compact_wait_seconds if body.wait is True else float(body.wait or 0)
    outcome = compact_on_request(
        database.transaction,
        database.read_session,
        inline_jobs,
        caller.tenant_id,
        key,
        settings,
        CompactRequest(body.token_budget, body.target_tokens, wait),
        link,
    )
    return CompactOut(
        conversation_id=outcome.conversation_id,
        status=outcome.status,
        context_tokens_before=outcome.tokens_before,
        context_tokens_after=outcome.tokens_after,
    )


@router.get("/{key:path}/status", response_model=ConversationStatus, responses=error_responses(404))
def get_status(
    key: SessionKey,
    caller: ReadCaller,
    session: ReadSessionDep,
    settings: SettingsDep,
    token_budget: Annotated[int | None, Query(gt=0, le=10_000_000)] = None,
    session_id: Annotated[SessionIdText | None, Query()] = None,
) -> Any:  # the domain's dataclass, checked against ConversationStatus on the way out
    conversation = resolve_for_read(session, caller.tenant_id, key, session_id)
    effective = caller.settings
    budget = effective.capped_budget(token_budget or settings.default_token_budget)
    return conversation_status(session, conversation, effective, budget)


@router.get("/{key:path}/host-cursor", response_model=HostCursorOut, responses=error_responses(404))
def get_host_cursor(
    key: SessionKey,
    caller: ReadCaller,
    session: ReadSessionDep,
    session_id: Annotated[SessionIdText | None, Query()] = None,
) -> Any:  # the domain's dataclass, checked against HostCursorOut on the way out
    return read_host_cursor(session, caller.tenant_id, key, session_id)

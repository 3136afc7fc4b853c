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
    SessionIdText,
    TurnIn,
    TurnOut,
)
from api.deps import (
    DatabaseDep,
    IngestKey,
    IngestTenant,
    ReadSessionDep,
    ReadTenant,
    ServicesDep,
    SettingsDep,
    SnapshotReadDep,
)
from api.inline_compaction import InlineJobsDep, compaction_outcome
from api.openapi import error_responses
from api.responses import model_response
from api.schemas import prepared_batch
from api.validation import SessionKey
from lcm.assembly import TimeSpan
from lcm.assembly.service import assemble
from lcm.compaction.inline import run_inline
from lcm.compaction.service import context_token_total, owe_compaction, wait_for_debt
from lcm.conversations.host_cursor import read_host_cursor
from lcm.conversations.patterns import write_skip
from lcm.conversations.service import resolve_for_read, target_for_read
from lcm.db.models import utcnow
from lcm.ingest.service import ReplayFloodLimits, ingest_messages
from lcm.ingest.turns import LivePrompt, after_turn
from lcm.lifecycle.recall import recall_prompt
from lcm.policy.overrides import ModelInfo, settings_for_call
from lcm.status.service import conversation_status
from lcm.tenants.quota import StorageQuota
from lcm.tenants.service import effective_settings
from workers import completions

router = APIRouter(prefix="/v1/conversations", tags=["conversations"])


@router.post("/{key:path}/messages", response_model=MessagesOut, responses=error_responses(409))
def post_messages(
    key: SessionKey,
    body: MessagesIn,
    check: IngestKey,
    database: DatabaseDep,
    settings: SettingsDep,
    services: ServicesDep,
) -> MessagesOut | Response:
    caller = check.caller()
    batch = prepared_batch(body, settings)
    tenant_id, effective = caller.tenant_id, caller.settings
    skipped = write_skip(effective, key)
    if skipped is not None:
        return MessagesOut(
            conversation_id=None, ingested=0, duplicates=0, **MessagesOut.flags(skipped)
        )
    # The unit of work opened here rather than by a session dependency: a
    # generator dependency costs two more thread-pool hops per request (enter
    # and exit), and this is the hottest write route. It commits (and sends
    # its jobs) before the response, as the dependency's would.
    with database.transaction() as session:
        result = ingest_messages(
            session,
            tenant_id,
            key,
            body.session_id,
            batch,
            large_files=services.large_files(effective),
            new_session_retain_depth=effective.new_session_retain_depth,
            quota=StorageQuota.of(effective),
            replay_limits=ReplayFloodLimits.of(effective),
            host_cursor=body.host_cursor,
        )
    # Validated as it is built: not validated again (see model_response).
    return model_response(
        MessagesOut(
            conversation_id=result.conversation_id,
            ingested=result.ingested,
            duplicates=result.duplicates,
        )
    )


@router.post("/{key:path}/turns", response_model=TurnOut, responses=error_responses(409))
def post_turn(
    key: SessionKey,
    body: TurnIn,
    check: IngestKey,
    database: DatabaseDep,
    settings: SettingsDep,
    services: ServicesDep,
    inline_jobs: InlineJobsDep,
) -> TurnOut | Response:
    caller = check.caller()
    batch = prepared_batch(body, settings)
    # Messages and debt commit first (the wake-up leaves with that commit);
    # inline mode then runs the sweep over the committed turn.
    with database.transaction() as session:
        turn = after_turn(
            session,
            caller.tenant_id,
            key,
            body.session_id,
            batch,
            body.token_budget,
            caller.settings,
            services.storage,
            ModelInfo(body.model, body.context_window),
            LivePrompt(body.current_token_count, body.overflow),
        )
    if turn.ingest is None:
        return TurnOut.of(turn, "none")
    compaction = compaction_outcome(
        turn.over_threshold, turn.mode, turn.ingest.conversation_id, inline_jobs
    )
    if compaction != "ran":
        # Validated as it is built: not validated again (see model_response).
        return model_response(TurnOut.of(turn, compaction))
    with database.read_session() as fresh:  # the host retries with what the sweep left
        after = context_token_total(fresh, turn.ingest.conversation_id)
    return TurnOut.of(turn, compaction, after)


@router.post("/{key:path}/assemble", response_model=AssembleOut, responses=error_responses(404))
def post_assemble(key: SessionKey, body: AssembleIn, read: SnapshotReadDep) -> Response:
    with read as (session, caller):  # opened and ended in this thread (see SnapshotRead)
        conversation = target_for_read(session, caller.tenant_id, key, body.session_id)
        effective = settings_for_call(
            caller.settings, conversation, ModelInfo(body.model, body.context_window)
        )
        budget = effective.capped_budget(body.token_budget)
        result = assemble(session, conversation.id, budget, effective, times=body.include_times)
    tools = frozenset(body.available_tools) if body.available_tools is not None else None
    # Built from the domain's typed result: not validated again (see model_response).
    return model_response(
        AssembleOut.model_construct(
            conversation_id=conversation.id,
            token_budget=budget,
            messages=result.messages,
            estimated_tokens=result.estimated_tokens,
            summary_count=result.summary_count,
            fresh_tail_count=result.fresh_tail_count,
            fresh_tail_overflow=result.fresh_tail_overflow,
            system_prompt_addition=recall_prompt(result.summary_count, tools, body.tool_caller)
            if body.system_prompt
            else None,
            message_times=_message_times(result.message_spans()) if body.include_times else None,
        )
    )


def _message_times(spans: list[TimeSpan]) -> list[MessageTimes]:
    return [
        MessageTimes.model_construct(created_at=latest, earliest_at=earliest, latest_at=latest)
        for earliest, latest in spans
    ]


@router.post("/{key:path}/compact", response_model=CompactOut, responses=error_responses(404))
def post_compact(
    key: SessionKey,
    body: CompactIn,
    tenant_id: IngestTenant,
    database: DatabaseDep,
    settings: SettingsDep,
    inline_jobs: InlineJobsDep,
) -> CompactOut:
    asked_at = utcnow()
    with database.read_session() as session:
        skipped = write_skip(effective_settings(session, tenant_id, settings), key)
    if skipped is not None:  # nothing is compacted for an ignored or stateless session
        return CompactOut(
            conversation_id=None,
            status=skipped,
            context_tokens_before=0,
            context_tokens_after=0,
        )
    # The debt commits first (the wake-up leaves with that commit); then an
    # inline sweep runs, or the request waits for the worker's.
    with database.transaction() as session:
        conversation = resolve_for_read(session, tenant_id, key)
        before = context_token_total(session, conversation.id)
        mode = effective_settings(session, tenant_id, settings).compaction_mode
        owe_compaction(
            session,
            tenant_id,
            conversation.id,
            "manual",
            body.token_budget,
            body.target_tokens,
            mode=mode,
        )
    if mode == "inline":
        run_inline(inline_jobs(), conversation.id)
    timeout = settings.compact_wait_seconds if body.wait is True else float(body.wait or 0)
    status = wait_for_debt(
        database.read_session,
        conversation.id,
        asked_at,
        min(timeout, settings.compact_wait_max_seconds),
        completions.hub(settings.broker_url),  # the worker wakes us when the debt settles
        completions.RECHECK_SECONDS,
    )
    with database.read_session() as fresh:
        after = context_token_total(fresh, conversation.id)
    return CompactOut(
        conversation_id=conversation.id,
        status=status or "none",
        context_tokens_before=before,
        context_tokens_after=after,
    )


@router.get("/{key:path}/status", response_model=ConversationStatus, responses=error_responses(404))
def get_status(
    key: SessionKey,
    tenant_id: ReadTenant,
    session: ReadSessionDep,
    settings: SettingsDep,
    token_budget: Annotated[int | None, Query(gt=0, le=10_000_000)] = None,
    session_id: Annotated[SessionIdText | None, Query()] = None,
) -> Any:  # the domain's dataclass, checked against ConversationStatus on the way out
    conversation = resolve_for_read(session, tenant_id, key, session_id)
    effective = effective_settings(session, tenant_id, settings)
    budget = effective.capped_budget(token_budget or settings.default_token_budget)
    return conversation_status(session, conversation, effective, budget)


@router.get("/{key:path}/host-cursor", response_model=HostCursorOut, responses=error_responses(404))
def get_host_cursor(
    key: SessionKey,
    tenant_id: ReadTenant,
    session: ReadSessionDep,
    session_id: Annotated[SessionIdText | None, Query()] = None,
) -> Any:  # the domain's dataclass, checked against HostCursorOut on the way out
    return read_host_cursor(session, tenant_id, key, session_id)

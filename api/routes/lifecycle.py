"""Agent-host lifecycle endpoints: exactly-once turn commits and subagent forks.

``POST /v1/conversations/{key}/commits`` stores one accepted turn under the
host's advancement key (a retry answers ``duplicate``); ``…/fork`` prepares a
child conversation from a parent's context, ``…/fork/end`` and
``…/fork/rollback`` finish it. ``…/session`` is the host's ``/new`` and
``/reset`` (:mod:`lcm.conversations.reset`).
"""

from __future__ import annotations

from fastapi import APIRouter

from api.contract import (
    CommitIn,
    CommitOut,
    ForkEndIn,
    ForkEndOut,
    ForkIn,
    ForkOut,
    SessionResetIn,
    SessionResetOut,
    TurnOut,
)
from api.deps import DatabaseDep, IngestCaller, ServicesDep, SessionDep, SettingsDep
from api.inline_compaction import InlineJobsDep
from api.openapi import error_responses
from api.schemas import prepared_batch
from api.validation import SessionKey
from lcm.address import SessionAddress
from lcm.conversations.reset import new_session, reset_session
from lcm.lifecycle.forks import end_fork, prepare_fork
from lcm.lifecycle.gateway import TurnInput, commit_host_turn
from lcm.policy.overrides import ModelInfo
from lcm.secrets.service import SecretScan
from lcm.tenants.quota import StorageQuota

router = APIRouter(prefix="/v1/conversations", tags=["lifecycle"])


@router.post("/{key:path}/commits", response_model=CommitOut, responses=error_responses(409))
def post_commit(
    key: SessionKey,
    body: CommitIn,
    caller: IngestCaller,
    database: DatabaseDep,
    settings: SettingsDep,
    services: ServicesDep,
    inline_jobs: InlineJobsDep,
) -> CommitOut:
    batch = prepared_batch(body, settings)
    # Turn, key and debt commit first (the wake-up leaves with that commit);
    # inline mode then runs the sweep over the committed turn.
    result, compaction = commit_host_turn(
        database.transaction,
        inline_jobs,
        SessionAddress(caller.tenant_id, key, body.session_id),
        body.advancement_key,
        batch,
        TurnInput(
            body.token_budget,
            ModelInfo(body.model, body.context_window),
            body.live_prompt(),
        ),
        caller.settings,
        services.storage,
    )
    turn = result.turn
    if result.skipped is not None:
        return CommitOut(
            conversation_id=None,
            status="skipped",
            ingested=0,
            duplicates=0,
            context_tokens=None,
            threshold_tokens=None,
            compaction="none",
            **CommitOut.flags(result.skipped),
        )
    if turn is None:
        return CommitOut(
            conversation_id=result.conversation_id,
            status="duplicate",
            ingested=0,
            duplicates=len(body.messages),
            context_tokens=None,
            threshold_tokens=None,
            compaction="none",
        )
    return CommitOut(status="committed", **TurnOut.of(turn, compaction).model_dump())


@router.post("/{key:path}/fork", response_model=ForkOut, responses=error_responses(409))
def post_fork(
    key: SessionKey,
    body: ForkIn,
    caller: IngestCaller,
    session: SessionDep,
    settings: SettingsDep,
) -> ForkOut:
    result = prepare_fork(
        session,
        caller.tenant_id,
        key,
        body.session_id,
        body.parent_session_key,
        body.parent_session_id,
        body.mode,
        body.ttl_seconds,
        settings.max_message_chars,
        StorageQuota.of(caller.settings),
        SecretScan.of(caller.settings),
    )
    return ForkOut(
        conversation_id=result.child_conversation_id,
        parent_conversation_id=result.parent_conversation_id,
        mode=result.mode,
        status=result.status,
        created=result.created,
        summaries_shared=result.summaries_shared,
        messages_copied=result.messages_copied,
    )


@router.post("/{key:path}/fork/end", response_model=ForkEndOut)
def post_fork_end(
    key: SessionKey, body: ForkEndIn, caller: IngestCaller, session: SessionDep
) -> ForkEndOut:
    fork = end_fork(session, caller.tenant_id, key, body.reason)
    return ForkEndOut(
        conversation_id=fork.child_conversation_id, status=fork.status, end_reason=fork.end_reason
    )


@router.post("/{key:path}/fork/rollback", response_model=ForkEndOut)
def post_fork_rollback(key: SessionKey, caller: IngestCaller, session: SessionDep) -> ForkEndOut:
    fork = end_fork(session, caller.tenant_id, key, "rolled_back", rollback=True)
    return ForkEndOut(
        conversation_id=fork.child_conversation_id, status=fork.status, end_reason=fork.end_reason
    )


@router.post("/{key:path}/session", response_model=SessionResetOut, responses=error_responses(409))
def post_session(
    key: SessionKey,
    body: SessionResetIn,
    caller: IngestCaller,
    session: SessionDep,
) -> SessionResetOut:
    """``/new`` (prune the live context) or ``/reset`` (archive, start an empty conversation)."""
    if body.mode == "new":
        depth = body.retain_depth
        if depth is None:
            depth = caller.settings.new_session_retain_depth
        done = new_session(session, caller.tenant_id, key, depth)
    else:
        done = reset_session(session, caller.tenant_id, key, body.session_id)
    return SessionResetOut(
        mode=done.mode,
        conversation_id=done.conversation_id,
        archived_conversation_id=done.archived_conversation_id,
        context_items_removed=done.context_items_removed,
    )

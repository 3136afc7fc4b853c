"""After a turn: store its messages, then check the threshold and record debt."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.orm import Session

from lcm.compaction.jobs import context_token_total, owe_compaction
from lcm.compaction.overrides import ModelInfo, for_model
from lcm.compaction.planning import evaluate_threshold
from lcm.conversations.patterns import WriteSkip, write_skip
from lcm.conversations.repository import ConversationRepository
from lcm.files.extraction import LargeFileExtractor
from lcm.files.storage import FileStorage
from lcm.ingest.content import PreparedMessage
from lcm.ingest.service import IngestResult, ReplayFloodLimits, ingest_messages
from lcm.settings import Settings
from lcm.tenants.quota import StorageQuota


@dataclass(frozen=True, slots=True)
class TurnResult:
    ingest: IngestResult | None  # None when the session's writes are skipped
    context_tokens: int
    threshold_tokens: int
    over_threshold: bool
    mode: str  # deferred (a wake-up is in the outbox) | inline (the caller runs the sweep)
    skipped: WriteSkip | None = None


def after_turn(
    session: Session,
    tenant_id: str,
    session_key: str,
    session_id: str | None,
    batch: Sequence[PreparedMessage],
    token_budget: int,
    settings: Settings,
    storage: FileStorage,
    model: ModelInfo | None = None,
) -> TurnResult:
    """Ingest ``batch`` and, at or over the threshold, record (coalesced) threshold debt.

    Everything happens in the caller's one transaction: the messages and the
    debt row commit together or not at all, and the wake-up (deferred mode)
    is sent only after that commit. Below the threshold no debt is written.
    ``settings`` are the tenant's effective settings; the ``model_overrides``
    rule matching ``model`` (or the conversation's last named model) applies
    on top, and the conversation remembers ``model`` for its sweeps. An
    ignored or stateless session writes nothing.
    """
    skip = write_skip(settings, session_key)
    if skip is not None:
        return TurnResult(None, 0, 0, False, settings.compaction_mode, skip)
    model = model or ModelInfo()
    ingest = ingest_messages(
        session,
        tenant_id,
        session_key,
        session_id,
        batch,
        large_files=LargeFileExtractor.for_settings(storage, settings),
        new_session_retain_depth=settings.new_session_retain_depth,
        quota=StorageQuota.of(settings),
        replay_limits=ReplayFloodLimits.of(settings),
    )
    conversations = ConversationRepository(session)
    conversations.remember_model(ingest.conversation_id, model.model, model.context_window)
    # What this turn named, else what an earlier one did: the sweep uses the same.
    settings = for_model(settings, *conversations.model_of(ingest.conversation_id))
    tokens = context_token_total(session, ingest.conversation_id)
    check = evaluate_threshold(tokens, token_budget, settings)
    if check.over_threshold:
        owe_compaction(
            session,
            tenant_id,
            ingest.conversation_id,
            "threshold",
            token_budget,
            mode=settings.compaction_mode,
        )
    return TurnResult(
        ingest, tokens, check.threshold_tokens, check.over_threshold, settings.compaction_mode
    )

"""After a turn: store its messages, then check the threshold and record debt."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.orm import Session

from lcm.address import SessionAddress
from lcm.compaction.service import context_token_total, owe_compaction
from lcm.content import PreparedMessage
from lcm.conversations.patterns import WriteSkip, write_skip
from lcm.conversations.repository import ConversationRepository
from lcm.db.engine import Transaction
from lcm.files.extraction import LargeFileExtractor
from lcm.files.storage import FileStorage
from lcm.ingest.service import IngestResult, ReplayFloodLimits, ingest_messages
from lcm.policy.overrides import ModelInfo, for_model
from lcm.policy.threshold import ThresholdCheck, evaluate_threshold
from lcm.secrets.service import SecretScan
from lcm.settings import Settings
from lcm.tenants.host_usage import HostTurnUsage, record_host_usage
from lcm.tenants.quota import StorageQuota


@dataclass(frozen=True, slots=True)
class TurnResult:
    ingest: IngestResult | None  # None when the session's writes are skipped
    context_tokens: int  # what the threshold was checked against (live count when given)
    threshold_tokens: int
    over_threshold: bool  # or overflow reported: compaction is owed either way
    mode: str  # deferred (a wake-up is in the outbox) | inline (the caller runs the sweep)
    token_budget: int  # as used: the requested one, capped by max_assembly_token_budget
    target_tokens: int | None = None  # overflow: what the stored context is compacted to
    skipped: WriteSkip | None = None


@dataclass(frozen=True, slots=True)
class LivePrompt:
    """What the host reports about its own prompt on this turn."""

    # The host's prompt tokens: the context plus its system prompt and tool
    # schemas. Checked against the threshold instead of the stored estimate.
    current_token_count: int | None = None
    # The provider refused the prompt as too long: compact under the budget
    # before the host retries.
    overflow: bool = False
    # What the host's model call of this turn used (cache reads and writes
    # included): stored with the turn for the usage report.
    usage: HostTurnUsage | None = None


def overflow_target(threshold_tokens: int, stored_tokens: int, live_tokens: int | None) -> int:
    """The stored context's target after an overflow: the threshold, less the host's overhead.

    The overhead (system prompt, tool schemas) is the live count beyond the
    stored context; without a live count it is taken as nothing.
    """
    overhead = max(0, (live_tokens or stored_tokens) - stored_tokens)
    return max(1, threshold_tokens - overhead)


def store_messages(
    transaction: Transaction,
    address: SessionAddress,
    batch: Sequence[PreparedMessage],
    settings: Settings,
    storage: FileStorage,
    host_cursor: str | None = None,
) -> IngestResult | WriteSkip:
    """Store a batch in its own unit of work (no threshold check), or why it is skipped.

    ``settings`` are the tenant's effective settings; an ignored or
    stateless session opens no transaction and writes nothing.
    """
    skip = write_skip(settings, address.session_key)
    if skip is not None:
        return skip
    with transaction() as session:
        return ingest_messages(
            session,
            address.tenant_id,
            address.session_key,
            address.session_id,
            batch,
            large_files=LargeFileExtractor.for_settings(storage, settings),
            new_session_retain_depth=settings.new_session_retain_depth,
            quota=StorageQuota.of(settings),
            replay_limits=ReplayFloodLimits.of(settings),
            host_cursor=host_cursor,
            secrets=SecretScan.of(settings),
        )


def after_turn(
    session: Session,
    address: SessionAddress,
    batch: Sequence[PreparedMessage],
    token_budget: int,
    settings: Settings,
    storage: FileStorage,
    model: ModelInfo | None = None,
    live: LivePrompt | None = None,
) -> TurnResult:
    """Ingest ``batch`` and, at or over the threshold, record (coalesced) threshold debt.

    Everything happens in the caller's one transaction: the messages and the
    debt row commit together or not at all, and the wake-up (deferred mode)
    is sent only after that commit. Below the threshold no debt is written.
    ``settings`` are the tenant's effective settings; the ``model_overrides``
    rule matching ``model`` (or the conversation's last named model) applies
    on top, and the conversation remembers ``model`` for its sweeps. With
    ``live``, the host's own prompt count is what the threshold is checked
    against, and an overflow records ``overflow`` debt with a target under
    the budget. An ignored or stateless session writes nothing.
    """
    skip = write_skip(settings, address.session_key)
    if skip is not None:
        token_budget = settings.capped_budget(token_budget)
        return TurnResult(None, 0, 0, False, settings.compaction_mode, token_budget, skipped=skip)
    return record_turn(session, address, batch, token_budget, settings, storage, model, live)


def record_turn(
    session: Session,
    address: SessionAddress,
    batch: Sequence[PreparedMessage],
    token_budget: int,
    settings: Settings,
    storage: FileStorage,
    model: ModelInfo | None = None,
    live: LivePrompt | None = None,
) -> TurnResult:
    """:func:`after_turn` for a session whose writes the caller found stored (not skipped)."""
    token_budget = settings.capped_budget(token_budget)
    tenant_id = address.tenant_id
    model, live = model or ModelInfo(), live or LivePrompt()
    ingest = ingest_messages(
        session,
        tenant_id,
        address.session_key,
        address.session_id,
        batch,
        large_files=LargeFileExtractor.for_settings(storage, settings),
        new_session_retain_depth=settings.new_session_retain_depth,
        quota=StorageQuota.of(settings),
        replay_limits=ReplayFloodLimits.of(settings),
        count_context_tokens=True,
        secrets=SecretScan.of(settings),
    )
    conversation_id = ingest.conversation_id
    # What this turn named, else what an earlier one did: the sweep uses the same.
    named = _remember_model(session, model, ingest)
    settings = for_model(settings, *named)
    if live.usage is not None and ingest.ingested:
        # Only a turn's first delivery counts it: a retried turn (every
        # message a duplicate) would count the same model call twice.
        record_host_usage(session, tenant_id, conversation_id, named[0], live.usage)
    stored = _stored_tokens(session, ingest)
    tokens = stored if live.current_token_count is None else live.current_token_count
    check = evaluate_threshold(tokens, token_budget, settings)
    target = _owe_if_due(
        session, tenant_id, conversation_id, check, stored, live, token_budget, settings
    )
    return TurnResult(
        ingest,
        tokens,
        check.threshold_tokens,
        check.over_threshold or live.overflow,
        settings.compaction_mode,
        token_budget,
        target,
    )


def _stored_tokens(session: Session, ingest: IngestResult) -> int:
    """The context's token total: as the ingest counted it, else (no new message) read."""
    if ingest.context_tokens is not None:
        return ingest.context_tokens
    return context_token_total(session, ingest.conversation_id)


def _remember_model(
    session: Session, model: ModelInfo, ingest: IngestResult
) -> tuple[str | None, int | None]:
    """Remember what the turn named; the conversation's model and context window after.

    The ingest read them from the locked row, so no re-read; only a change is written.
    """
    named = (
        model.model if model.model is not None else ingest.model_id,
        model.context_window if model.context_window is not None else ingest.context_window,
    )
    ConversationRepository(session).remember_model(
        ingest.conversation_id,
        named[0] if named[0] != ingest.model_id else None,
        named[1] if named[1] != ingest.context_window else None,
    )
    return named


def _owe_if_due(
    session: Session,
    tenant_id: str,
    conversation_id: int,
    check: ThresholdCheck,
    stored: int,
    live: LivePrompt,
    token_budget: int,
    settings: Settings,
) -> int | None:
    """Record threshold or overflow debt when due; the overflow's target, if any."""
    target = None
    if live.overflow:
        target = overflow_target(check.threshold_tokens, stored, live.current_token_count)
    if check.over_threshold or live.overflow:
        owe_compaction(
            session,
            tenant_id,
            conversation_id,
            "overflow" if live.overflow else "threshold",
            token_budget,
            target,
            mode=settings.compaction_mode,
        )
    return target

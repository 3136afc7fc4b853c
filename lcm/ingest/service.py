"""Ingest: store a gateway's batch of messages exactly once, all or nothing."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from lcm.content import IncomingMessage, PreparedMessage, prepare_message
from lcm.conversations.repository import ConversationRepository
from lcm.conversations.service import target_for_write
from lcm.db.models import utcnow
from lcm.errors import Conflict, TooLarge
from lcm.files.extraction import LargeFileExtractor, PendingFile
from lcm.files.repository import LargeFileRepository
from lcm.ingest.repository import MessageRepository, NewPart
from lcm.outbox import SummarizeFile, request_job
from lcm.retrieval.search_backlog import request_indexing
from lcm.secrets.service import DEFAULT_SCAN, ScannedText, SecretScan, message_texts, record_secrets
from lcm.semantic.backfill import request_embedding
from lcm.settings import CompactionSettings
from lcm.tenants.quota import UNLIMITED, StorageQuota, charge_storage


@dataclass(frozen=True)
class IngestResult:
    conversation_id: int
    ingested: int
    duplicates: int
    first_seq: int | None
    last_seq: int | None
    # Large files taken out of the batch: enqueue their summaries after commit.
    file_ids: tuple[str, ...] = ()
    # What the conversation row held when the ingest locked it: the model and
    # context window the latest turn named (``after_turn`` needs no re-read).
    model_id: str | None = None
    context_window: int | None = None
    # The context's token total after the batch, when asked for
    # (``count_context_tokens``) and the batch held new messages.
    context_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class ReplayFloodLimits:
    """How often one message without any key may repeat inside a batch.

    A message with neither an ``id`` nor an event key (``lcm.content.
    event_key``) cannot be recognised when sent again, so a gateway replaying
    its history without ids would store it twice. Such a replay shows as the
    same text repeated: past these counts (``user`` messages: ``external``;
    other roles, whose identical short outputs such as ``{"ok": true}`` are
    normal: ``internal``) the batch is refused whole with 409 ``replay_flood``.
    """

    external: int
    internal: int

    @classmethod
    def of(cls, settings: CompactionSettings) -> ReplayFloodLimits:
        return cls(
            settings.replay_flood_threshold_external, settings.replay_flood_threshold_internal
        )

    def check(self, batch: Sequence[PreparedMessage]) -> None:
        repeats = Counter((m.role, m.content) for m in batch if m.client_id is None)
        for (role, _content), count in repeats.items():
            limit = self.external if role == "user" else self.internal
            if count > limit:
                raise Conflict(
                    f"{count} identical {role} messages without id in one batch (the limit is "
                    f"{limit}): this looks like a replay; send message ids to make it safe",
                    code="replay_flood",
                )


def prepare_batch(
    messages: Sequence[IncomingMessage], *, max_batch: int, max_chars: int
) -> list[PreparedMessage]:
    """Validate a whole batch before anything is written (all or nothing)."""
    if len(messages) > max_batch:
        raise TooLarge(f"a batch holds at most {max_batch} messages; got {len(messages)}")
    return [prepare_message(m, f"messages[{i}]", max_chars) for i, m in enumerate(messages)]


def ingest_messages(
    session: Session,
    tenant_id: str,
    session_key: str,
    session_id: str | None,
    batch: Sequence[PreparedMessage],
    *,
    large_files: LargeFileExtractor | None = None,
    new_session_retain_depth: int = -1,
    quota: StorageQuota = UNLIMITED,
    replay_limits: ReplayFloodLimits | None = None,
    count_context_tokens: bool = False,
    host_cursor: str | None = None,
    secrets: SecretScan = DEFAULT_SCAN,
) -> IngestResult:
    """Append ``batch`` to the conversation; the caller commits.

    A message whose client id (its ``id``, or for one sent without, its event
    key) is already stored for the conversation (or repeated inside the
    batch) is skipped and counted as a duplicate. New messages get
    consecutive seqs after the conversation's ``last_seq``; the conversation
    row lock taken by ``target_for_write`` makes that range ours. With
    ``large_files``, oversized payloads of the new messages are stored outside
    the database and replaced by references (``lcm.files.extraction``). Every
    new message and file byte is charged to the tenant's storage counters;
    past ``quota`` the whole batch is refused (``lcm.tenants.quota``). With
    ``replay_limits``, a batch that looks like a replay is refused first. With
    ``count_context_tokens``, the result holds the context's token total. The
    new messages' and files' secrets are recorded as spans (``secrets``).
    ``host_cursor`` is stored on the conversation, even when the batch brings
    nothing new (a batch of duplicates or none), and only with the batch.
    """
    if replay_limits is not None:
        replay_limits.check(batch)
    conversation = target_for_write(
        session, tenant_id, session_key, session_id, retain_depth=new_session_retain_depth
    )
    if host_cursor is not None:  # in the batch's transaction: a refused batch leaves it
        ConversationRepository(session).store_host_cursor(conversation.id, host_cursor)
    model = (conversation.model_id, conversation.context_window)
    fresh = _new_messages(MessageRepository(session), conversation.id, batch)
    duplicates = len(batch) - len(fresh)
    if not fresh:
        return IngestResult(conversation.id, 0, duplicates, None, None, (), *model)
    files: list[PendingFile] = []
    if large_files is not None:
        fresh, files = large_files.extract(tenant_id, fresh)
    first_seq, last_seq, ids, tokens = _write_rows(
        session, tenant_id, conversation.id, fresh, count_context_tokens
    )
    cid = conversation.id
    file_ids = _store_files_and_spans(session, tenant_id, cid, ids, fresh, files, secrets)
    # Last, so the tenant row lock it takes is held only until the commit.
    charge_storage(session, tenant_id, len(fresh), sum(f.byte_size for f in files), quota)
    for file_id in file_ids:  # after commit: the rows exist when a worker looks
        request_job(session, SummarizeFile(file_id))
    request_indexing(session)  # SQLite: search indexing after commit (not under its lock)
    request_embedding(session, cid)  # semantic recall: after commit, where it is on
    written = (len(fresh), duplicates, first_seq, last_seq, tuple(file_ids))
    return IngestResult(cid, *written, *model, tokens)


def _store_files_and_spans(
    session: Session,
    tenant_id: str,
    conversation_id: int,
    ids: Sequence[int],
    fresh: Sequence[PreparedMessage],
    files: Sequence[PendingFile],
    secrets: SecretScan,
) -> list[str]:
    """The batch's large file rows, then the spans of the secrets in its messages and files.

    In the batch's transaction: a refused batch leaves neither. Returns the file ids.
    """
    file_ids = LargeFileRepository(session).insert_pending(tenant_id, conversation_id, ids, files)
    texts = list(message_texts(ids, [m.parts for m in fresh]))
    for file_id, file in zip(file_ids, files, strict=True):
        if file.text:
            texts.append(ScannedText(file.text, file_id=file_id))
    record_secrets(session, tenant_id, conversation_id, texts, secrets)
    return file_ids


def _new_messages(
    messages: MessageRepository, conversation_id: int, batch: Sequence[PreparedMessage]
) -> list[PreparedMessage]:
    """The messages of ``batch`` not stored yet and not repeated earlier in the batch."""
    with_ids = [m.client_id for m in batch if m.client_id is not None]
    seen = messages.existing_client_ids(conversation_id, with_ids) if with_ids else set()
    fresh: list[PreparedMessage] = []
    for message in batch:
        if message.client_id is not None:
            if message.client_id in seen:
                continue
            seen.add(message.client_id)
        fresh.append(message)
    return fresh


def _write_rows(
    session: Session,
    tenant_id: str,
    conversation_id: int,
    fresh: Sequence[PreparedMessage],
    count_tokens: bool,
) -> tuple[int, int, list[int], int | None]:
    """Insert messages, parts and context items.

    Returns (first seq, last seq, message ids, the context's token total
    after the insert if ``count_tokens``).
    """
    conversations, tokens = ConversationRepository(session), None
    if count_tokens:
        last_seq, last_ordinal, before = conversations.advance_counting_tokens(
            conversation_id, len(fresh)
        )
        tokens = before + sum(m.token_count for m in fresh)
    else:
        last_seq, last_ordinal = conversations.advance_appending(conversation_id, len(fresh))
    first_seq, first_ordinal = last_seq - len(fresh) + 1, last_ordinal - len(fresh) + 1
    ids = MessageRepository(session).insert_batch(
        tenant_id,
        conversation_id,
        first_ordinal,
        _message_rows(first_seq, fresh, utcnow()),
        [
            NewPart(first_seq + i, ordinal, p.part_type, p.text, p.tool_call_id, p.payload)
            for i, m in enumerate(fresh)
            for ordinal, p in enumerate(m.parts)
        ],
    )
    return first_seq, last_seq, ids, tokens


def _message_rows(
    first_seq: int, fresh: Sequence[PreparedMessage], now: datetime
) -> list[dict[str, Any]]:
    return [
        {
            "seq": first_seq + i,
            "role": m.role,
            "content": m.content,
            "content_shape": m.content_shape,
            "token_count": m.token_count,
            "created_at": m.created_at or now,
            "client_id": m.client_id,
            "provider": m.provider,
            "model": m.model,
        }
        for i, m in enumerate(fresh)
    ]

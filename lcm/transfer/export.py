"""Export a conversation as JSONL (imported back by :mod:`lcm.transfer.service`).

Export streams: messages are read a batch at a time, so memory does not grow
with the conversation. The caller gives it a session that sees one snapshot
(a SQLite read transaction; REPEATABLE READ on Postgres), so a pass
committing meanwhile cannot tear the DAG between two batches.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy.orm import Session

from lcm.conversations.repository import ConversationRepository
from lcm.db.models import (
    ContextItem,
    LargeFile,
    Message,
    MessagePart,
    Summary,
)
from lcm.errors import NotFound
from lcm.files.storage import FileStorage
from lcm.progress import OnProgress, no_progress
from lcm.secrets import (
    SecretSpan,
    file_spans,
    mask_detected,
    mask_stored,
    mask_text,
    message_spans,
)
from lcm.transfer.records import (
    ContextItemRecord,
    ConversationRecord,
    FileRecord,
    MessageRecord,
    PartRecord,
    SummaryRecord,
)
from lcm.transfer.repository import TransferRepository

EXPORT_BATCH = 500


def export_lines(
    session: Session,
    storage: FileStorage,
    tenant_id: str,
    conversation_id: int,
    on_progress: OnProgress = no_progress,
    *,
    with_secrets: bool = False,
) -> Iterator[str]:
    """The conversation as JSONL lines (each ends with a newline).

    ``on_progress`` hears of the messages written so far, out of all of them
    (the rest of an export, summaries and context items, is small beside them).
    Detected secrets are masked (their placeholders written in their place:
    an import of such an export stores the placeholders) unless
    ``with_secrets``: messages through their spans (one query a batch),
    UTF-8 files through theirs, summaries and file summaries by detection.
    """
    masked = not with_secrets
    conversation = ConversationRepository(session).get(tenant_id, conversation_id)
    if conversation is None:
        raise NotFound(f"no conversation {conversation_id}")
    repo = TransferRepository(session)
    yield _line(
        ConversationRecord(
            session_key=conversation.session_key,
            session_id=conversation.session_id,
            archived_at=conversation.archived_at,
            created_at=conversation.created_at,
        )
    )
    total, done = repo.message_count(conversation_id), 0
    on_progress(done, total)
    for batch in repo.message_batches(conversation_id, EXPORT_BATCH):
        spans = message_spans(session, tenant_id, [m.id for m, _ in batch]) if masked else {}
        for message, parts in batch:
            yield _line(_message_record(message, parts, spans.get(message.id, [])))
        done += len(batch)
        on_progress(done, max(done, total))
    seqs = repo.seqs_by_id(conversation_id)
    for file in repo.files(conversation_id):
        record = _file_record(file, storage.get(file.storage_uri), seqs)
        if masked:
            record = _masked_file(session, tenant_id, file.id, record)
        yield _line(record)
    message_links = repo.message_links(conversation_id)
    parent_links = repo.parent_links(conversation_id)
    for summary in repo.summaries(conversation_id):
        seqs_of = [seqs[m] for m in message_links.get(summary.id, [])]
        written = _summary_record(summary, seqs_of, parent_links.get(summary.id, []))
        if masked:  # one written before masking may quote a secret
            written = written.model_copy(update={"content": mask_detected(written.content)})
        yield _line(written)
    for item in repo.context_items(conversation_id):
        yield _line(_context_record(item, seqs))


def _message_record(
    message: Message, parts: Sequence[MessagePart], spans: Sequence[SecretSpan] = ()
) -> MessageRecord:
    content, texts, payloads = message.content, [p.text for p in parts], [p.payload for p in parts]
    if spans:
        content, texts, payloads = mask_stored(content, texts, payloads, spans)
    return MessageRecord(
        seq=message.seq,
        role=message.role,
        content=content,
        content_shape=message.content_shape,
        token_count=message.token_count,
        created_at=message.created_at,
        client_id=message.client_id,
        provider=message.provider,
        model=message.model,
        parts=[
            PartRecord(
                ordinal=p.ordinal,
                part_type=p.part_type,
                text=text,
                tool_call_id=p.tool_call_id,
                payload=payload,
            )
            for p, text, payload in zip(parts, texts, payloads, strict=True)
        ],
    )


def _summary_record(
    summary: Summary, message_seqs: list[int], parent_ids: list[str]
) -> SummaryRecord:
    return SummaryRecord(
        id=summary.id,
        kind=summary.kind,
        depth=summary.depth,
        content=summary.content,
        token_count=summary.token_count,
        source_token_count=summary.source_token_count,
        earliest_at=summary.earliest_at,
        latest_at=summary.latest_at,
        descendant_count=summary.descendant_count,
        file_ids=list(summary.file_ids or []),
        created_at=summary.created_at,
        escalation=summary.escalation,
        model=summary.model,
        degraded=summary.degraded,
        message_seqs=message_seqs,
        parent_ids=parent_ids,
    )


def _context_record(item: ContextItem, seqs: dict[int, int]) -> ContextItemRecord:
    return ContextItemRecord(
        ordinal=item.ordinal,
        item_type=item.item_type,
        message_seq=seqs[item.message_id] if item.message_id is not None else None,
        summary_id=item.summary_id,
        token_count=item.token_count,
    )


def _line(record: Any) -> str:
    return record.model_dump_json() + "\n"


def _file_record(file: LargeFile, data: bytes, seqs: dict[int, int]) -> FileRecord:
    try:
        content, encoding = data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        content, encoding = base64.b64encode(data).decode("ascii"), "base64"
    return FileRecord(
        id=file.id,
        message_seq=seqs.get(file.message_id) if file.message_id is not None else None,
        name=file.name,
        mime=file.mime,
        ext=file.ext,
        token_count=file.token_count,
        exploration_summary=file.exploration_summary,
        created_at=file.created_at,
        encoding=encoding,
        content=content,
    )


def _masked_file(session: Session, tenant_id: str, file_id: str, record: FileRecord) -> FileRecord:
    """A file record with its text's spans and its summary's detected secrets masked."""
    update: dict[str, Any] = {}
    if record.exploration_summary:
        update["exploration_summary"] = mask_detected(record.exploration_summary)
    spans = file_spans(session, tenant_id, file_id) if record.encoding == "utf-8" else []
    if spans:
        update["content"] = mask_text(record.content, spans)
    return record.model_copy(update=update) if update else record

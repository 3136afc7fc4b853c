"""Import a conversation exported as JSONL (:mod:`lcm.transfer.export`) into an empty one.

Import writes everything in the caller's one transaction and gives back the
same messages (seq, role, content, parts, timestamps) and the same DAG
(summaries with their kinds, depths, contents and links; context items in
order). Message ids are new. Summary and file ids are kept, so ids quoted in
summaries and messages (``sum_…``, ``file_…``) still resolve, with one
exception: a summary id already used by another conversation (importing a
copy beside its original) gets a new id, mapped consistently through links
and context items; the text of other summaries quoting it is not rewritten.
A file id already in use is refused (``Conflict``), since messages name files
by id in their text. A context item or link may also point at a summary
outside the file (a session that started from an earlier one's summaries):
it is kept if the tenant still has that summary, refused otherwise.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.orm import Session

from lcm.address import SessionAddress
from lcm.assembly import summary_context_tokens
from lcm.compaction.source import new_summary_id
from lcm.context import SummaryView
from lcm.context_store.repository import summary_view
from lcm.conversations.repository import ConversationRepository
from lcm.db.engine import Transaction
from lcm.db.models import (
    ContextItem,
    Conversation,
    LargeFile,
    MessagePart,
    Summary,
    SummaryMessage,
    SummaryParent,
    utcnow,
)
from lcm.errors import Conflict, InvalidInput
from lcm.files.storage import FileStorage
from lcm.retrieval.search_backlog import request_indexing
from lcm.secrets.service import DEFAULT_SCAN, ScannedText, SecretScan, message_texts, record_secrets
from lcm.semantic.backfill import request_embedding
from lcm.tenants.quota import UNLIMITED, StorageQuota, charge_storage
from lcm.transfer.records import (
    ConversationRecord,
    FileRecord,
    MessageRecord,
    SummaryRecord,
)
from lcm.transfer.repository import TransferRepository
from lcm.transfer.validation import ParsedExport, parse_export

__all__ = ["Imported", "ParsedExport", "import_conversation", "parse_export"]


@dataclass(frozen=True)
class Imported:
    conversation_id: int
    messages: int
    summaries: int
    files: int
    context_items: int
    renamed_summaries: dict[str, str]


def import_export(
    transaction: Transaction,
    storage: FileStorage,
    address: SessionAddress,
    export: ParsedExport,
    quota: StorageQuota | None = None,
    secrets: SecretScan = DEFAULT_SCAN,
) -> Imported:
    """:func:`import_conversation` in a unit of work of its own (committed when it returns)."""
    with transaction() as session:
        return import_conversation(
            session,
            storage,
            address.tenant_id,
            address.session_key,
            address.session_id,
            export,
            quota,
            secrets,
        )


def import_conversation(
    session: Session,
    storage: FileStorage,
    tenant_id: str,
    session_key: str,
    session_id: str | None,
    export: ParsedExport,
    quota: StorageQuota | None = None,
    secrets: SecretScan = DEFAULT_SCAN,
) -> Imported:
    """Write ``export`` into the (new or empty) conversation ``session_key``/``session_id``.

    The messages and file bytes are charged to the tenant's storage quota like
    any ingest (refused whole when over it). Secrets in the messages' parts and
    the text files are recorded as spans, as at ingest (the conversation row
    is locked or new, so no other writer numbers its secrets meanwhile).
    """
    repo = TransferRepository(session)
    _check_outside_refs(repo, tenant_id, export)
    conversation = _target(session, tenant_id, session_key, session_id, export.conversation)
    cid = conversation.id
    seq_to_id = _import_messages(repo, tenant_id, cid, export.messages)
    request_indexing(session)  # SQLite: search indexing after commit
    request_embedding(session, cid)  # semantic recall: after commit, where it is on
    file_bytes = _import_files(repo, storage, tenant_id, cid, export.files, seq_to_id)
    renamed = _import_summaries(repo, tenant_id, cid, export.summaries, seq_to_id)
    record_secrets(session, tenant_id, cid, _stored_texts(export, seq_to_id), secrets)
    _import_context(repo, tenant_id, cid, export, seq_to_id, renamed)
    charge_storage(session, tenant_id, len(export.messages), file_bytes, quota or UNLIMITED)
    conversation.last_seq = max((m.seq for m in export.messages), default=0)
    conversation.last_ordinal = max((i.ordinal for i in export.context_items), default=0)
    conversation.context_version += 1
    conversation.updated_at = utcnow()  # an import is activity: retention starts over
    session.flush()
    return Imported(
        cid,
        len(export.messages),
        len(export.summaries),
        len(export.files),
        len(export.context_items),
        {old: new for old, new in renamed.items() if old != new},
    )


def _import_messages(
    repo: TransferRepository, tenant_id: str, cid: int, messages: Sequence[MessageRecord]
) -> dict[int, int]:
    """Insert the messages and their parts; seq -> new message id."""
    seq_to_id = repo.insert_messages(
        [
            {
                "tenant_id": tenant_id,
                "conversation_id": cid,
                "seq": m.seq,
                "role": m.role,
                "content": m.content,
                "content_shape": m.content_shape,
                "token_count": m.token_count,
                "created_at": m.created_at,
                "client_id": m.client_id,
                "provider": m.provider,
                "model": m.model,
            }
            for m in messages
        ]
    )
    if len(seq_to_id) != len(messages):
        raise InvalidInput("the export repeats a message seq")
    repo.insert_rows(
        MessagePart,
        [
            {"tenant_id": tenant_id, "message_id": seq_to_id[m.seq], **p.model_dump()}
            for m in messages
            for p in m.parts
        ],
    )
    return seq_to_id


def _stored_texts(export: ParsedExport, seq_to_id: dict[int, int]) -> list[ScannedText]:
    """The imported messages' part texts and text files' contents, to scan for secrets."""
    messages = export.messages
    texts = list(message_texts([seq_to_id[m.seq] for m in messages], [m.parts for m in messages]))
    texts += [ScannedText(f.content, file_id=f.id) for f in export.files if f.encoding == "utf-8"]
    return texts


def _import_context(
    repo: TransferRepository,
    tenant_id: str,
    cid: int,
    export: ParsedExport,
    seq_to_id: dict[int, int],
    renamed: dict[str, str],
) -> None:
    """Insert the context items, each costing what assembly will count (never the file's)."""
    tokens = _item_tokens(repo, export, renamed)
    repo.insert_rows(
        ContextItem,
        [
            {
                "tenant_id": tenant_id,
                "conversation_id": cid,
                "ordinal": item.ordinal,
                "item_type": item.item_type,
                "message_id": _message_ref(seq_to_id, item.message_seq),
                "summary_id": renamed.get(item.summary_id, item.summary_id)
                if item.summary_id
                else None,
                "token_count": tokens[item.summary_id]
                if item.summary_id
                else tokens[item.message_seq],
            }
            for item in export.context_items
        ],
    )


def _item_tokens(
    repo: TransferRepository, export: ParsedExport, renamed: dict[str, str]
) -> dict[str | int | None, int]:
    """Message seq or summary id (as in the file) -> its context item's token count.

    A message costs its (recomputed) estimate; a summary its rendered XML,
    as compaction stores it (``summary_context_tokens``).
    """
    tokens: dict[str | int | None, int] = {m.seq: m.token_count for m in export.messages}
    for s in export.summaries:
        view = SummaryView(
            id=renamed[s.id],
            kind=s.kind,
            depth=s.depth,
            content=s.content,
            token_count=s.token_count,
            earliest_at=s.earliest_at,
            latest_at=s.latest_at,
            descendant_count=s.descendant_count,
            parent_ids=tuple(renamed.get(p, p) for p in s.parent_ids),
        )
        tokens[s.id] = summary_context_tokens(view)
    outside = {i.summary_id for i in export.context_items if i.summary_id} - set(tokens)
    for summary, parents in repo.summaries_with_parents(outside):
        tokens[summary.id] = summary_context_tokens(summary_view(summary, parents))
    return tokens


def _target(
    session: Session,
    tenant_id: str,
    session_key: str,
    session_id: str | None,
    header: ConversationRecord,
) -> Conversation:
    repo = ConversationRepository(session)
    found = (
        repo.find_by_session_id(tenant_id, session_key, session_id, lock=True)
        if session_id is not None
        else None
    )
    if found is not None:
        if not TransferRepository(session).is_empty(found.id):
            raise Conflict(
                f"conversation {found.id} already holds messages; import into an empty one",
                code="conversation_not_empty",
            )
        return found
    live = repo.find_active(tenant_id, session_key, lock=True)
    if live is not None and header.archived_at is None:
        raise Conflict(
            f"session family {session_key!r} already has a live conversation ({live.id})",
            code="conversation_not_empty",
        )
    return repo.add(
        Conversation(
            tenant_id=tenant_id,
            session_key=session_key,
            session_id=session_id,
            created_at=header.created_at,
            archived_at=header.archived_at,
        )
    )


def _message_ref(seq_to_id: dict[int, int], seq: int | None) -> int | None:
    if seq is None:
        return None
    if seq not in seq_to_id:
        raise InvalidInput(f"a record names message seq {seq}, which the export does not hold")
    return seq_to_id[seq]


def _import_files(
    repo: TransferRepository,
    storage: FileStorage,
    tenant_id: str,
    conversation_id: int,
    files: list[FileRecord],
    seq_to_id: dict[int, int],
) -> int:
    """Store the files' contents and rows; the bytes stored (for the quota)."""
    taken = repo.existing_file_ids([f.id for f in files])
    if taken:
        raise Conflict(f"file ids already in use: {sorted(taken)}", code="file_id_taken")
    rows = []
    stored_bytes = 0
    for f in files:
        data = (
            f.content.encode("utf-8")
            if f.encoding == "utf-8"
            else base64.b64decode(f.content, validate=True)
        )
        stored_bytes += len(data)
        sha = hashlib.sha256(data).hexdigest()
        # Content-addressed and idempotent: a rollback leaves at most an
        # object the same bytes would reuse.
        uri = storage.put(tenant_id, sha, data)
        rows.append(
            {
                "id": f.id,
                "tenant_id": tenant_id,
                "conversation_id": conversation_id,
                "message_id": _message_ref(seq_to_id, f.message_seq),
                "name": f.name,
                "mime": f.mime,
                "ext": f.ext,
                "byte_size": len(data),
                "token_count": f.token_count,
                "sha256": sha,
                "storage_uri": uri,
                "exploration_summary": f.exploration_summary,
                "created_at": f.created_at,
            }
        )
    repo.insert_rows(LargeFile, rows)
    return stored_bytes


def _import_summaries(
    repo: TransferRepository,
    tenant_id: str,
    conversation_id: int,
    summaries: list[SummaryRecord],
    seq_to_id: dict[int, int],
) -> dict[str, str]:
    """Insert summaries and their links; return old id -> id used (itself unless taken)."""
    taken = repo.existing_summary_ids([s.id for s in summaries])
    renamed = {s.id: (new_summary_id() if s.id in taken else s.id) for s in summaries}
    repo.insert_rows(
        Summary,
        [
            {
                "tenant_id": tenant_id,
                "conversation_id": conversation_id,
                **s.model_dump(exclude={"type", "message_seqs", "parent_ids"}),
                "id": renamed[s.id],
            }
            for s in summaries
        ],
    )
    repo.insert_rows(
        SummaryMessage,
        [
            {
                "summary_id": renamed[s.id],
                "message_id": _message_ref(seq_to_id, seq),
                "tenant_id": tenant_id,
                "ordinal": i,
            }
            for s in summaries
            for i, seq in enumerate(s.message_seqs)
        ],
    )
    repo.insert_rows(
        SummaryParent,
        [
            {
                "summary_id": renamed[s.id],
                "parent_id": renamed.get(parent, parent),
                "tenant_id": tenant_id,
                "ordinal": i,
            }
            for s in summaries
            for i, parent in enumerate(s.parent_ids)
        ],
    )
    repo.store_source_ranges(renamed.values())
    return renamed


def _check_outside_refs(repo: TransferRepository, tenant_id: str, export: ParsedExport) -> None:
    """Summaries named but not exported must be the tenant's own, still stored."""
    outside = export.outside_summary_ids()
    missing = outside - repo.tenant_summary_ids(tenant_id, outside)
    if not missing:
        return
    named: list[tuple[int, list[str | None]]] = [
        (line, list(s.parent_ids))
        for s, line in zip(export.summaries, export.summary_lines, strict=True)
    ]
    named += [
        (line, [i.summary_id])
        for i, line in zip(export.context_items, export.context_lines, strict=True)
    ]
    line = min(line for line, ids in named if missing.intersection(ids))
    raise InvalidInput(
        f"line {line}: the export names summaries it does not hold and this tenant lacks: "
        f"{sorted(missing)}"
    )

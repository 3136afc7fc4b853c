"""Bootstrap: reconcile a gateway's transcript with the stored conversation, never duplicating.

A transcript can be large (megabytes), and on SQLite a write transaction
holds the one database-wide write lock, so a bootstrap never writes in one
long transaction: it parses with no transaction open, then imports in chunks
of at most ``chunk_messages`` messages / ``chunk_chars`` characters, each its
own short transaction (the caller's ``transaction`` factory commits each),
so another tenant's request waits at most one chunk. The checkpoint is
written with the last chunk.

Exactly once, whatever fails between chunks: every transcript message has a
client id (its entry id, or a content hash), and ingest drops client ids
already stored, inside the same transaction and under the conversation's
write lock. A bootstrap cut short leaves a prefix of what it planned to
import and the previous checkpoint; the next call resumes from that
checkpoint (or anchors by id on the newest message stored) and the messages
already imported count as duplicates. Two bootstraps of one conversation at
once therefore also import each message once, in transcript order. A live
ingest into the same conversation while its bootstrap runs may land between
two chunks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from lcm.address import SessionAddress
from lcm.content import PreparedMessage, prepare_message
from lcm.conversations.patterns import WriteSkip, write_skip
from lcm.conversations.service import resolve_for_write
from lcm.db.engine import Transaction
from lcm.errors import Conflict
from lcm.files.extraction import LargeFileExtractor
from lcm.files.storage import FileStorage
from lcm.ingest.service import ingest_messages
from lcm.secrets.service import DEFAULT_SCAN, SecretScan
from lcm.settings import Settings
from lcm.tenants.quota import UNLIMITED, StorageQuota
from lcm.transcripts.anchor import (
    AnchorKind,
    ImportPlan,
    by_content,
    by_ids,
    identity,
    unanchored,
)
from lcm.transcripts.checkpoint import Checkpoint, next_checkpoint
from lcm.transcripts.model import FormatChoice, ParsedTranscript, TranscriptFormat
from lcm.transcripts.parse import parse_transcript
from lcm.transcripts.repository import TranscriptRepository

# Newest stored messages compared by content when no id matches.
CONTENT_WINDOW = 200
# One import transaction's share of a transcript. Measured on SQLite (2 shared
# cores): about 0.2 s per chunk of 500 KB of text, including the search
# indexes, so another tenant's write waits well under a second behind one.
CHUNK_MESSAGES = 500
CHUNK_CHARS = 500_000


@dataclass(frozen=True, slots=True)
class BootstrapOptions:
    transcript_format: FormatChoice = "auto"
    max_unanchored: int = 100
    max_unanchored_tokens: int | None = None
    max_message_chars: int = 2_000_000
    large_files: LargeFileExtractor | None = None
    new_session_retain_depth: int = -1
    quota: StorageQuota = UNLIMITED
    chunk_messages: int = CHUNK_MESSAGES
    chunk_chars: int = CHUNK_CHARS
    secrets: SecretScan = DEFAULT_SCAN

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        storage: FileStorage | None,
        transcript_format: FormatChoice = "auto",
    ) -> BootstrapOptions:
        """Options for ``settings`` (pass the tenant's effective settings).

        ``storage`` is the process's file store; ``None`` keeps large payloads inline.
        """
        return cls(
            transcript_format=transcript_format,
            max_unanchored=settings.bootstrap_max_unanchored,
            max_unanchored_tokens=settings.bootstrap_max_unanchored_tokens,
            max_message_chars=settings.max_message_chars,
            large_files=None
            if storage is None
            else LargeFileExtractor.for_settings(storage, settings),
            new_session_retain_depth=settings.new_session_retain_depth,
            quota=StorageQuota.of(settings),
            secrets=SecretScan.of(settings),
        )


@dataclass(frozen=True, slots=True)
class BootstrapResult:
    conversation_id: int
    imported: int
    duplicates: int
    anchor: AnchorKind
    anchor_seq: int | None
    format: TranscriptFormat
    # Messages in the part of the transcript that was read (all of it, or what
    # was appended since the checkpoint).
    transcript_messages: int
    file_ids: tuple[str, ...] = ()
    skipped: dict[str, int] = field(default_factory=dict)
    malformed_lines: int = 0


def tool_pairs(session: Session, conversation_id: int) -> int:
    """Tool calls of the conversation that have a result in it (an import's report)."""
    return TranscriptRepository(session).tool_pairs(conversation_id)


def bootstrap_session(
    transaction: Transaction,
    address: SessionAddress,
    transcript: bytes,
    settings: Settings,
    storage: FileStorage | None,
    transcript_format: FormatChoice = "auto",
) -> BootstrapResult | WriteSkip:
    """A gateway's bootstrap: :func:`bootstrap_transcript` at the tenant's settings.

    ``settings`` are the tenant's effective settings; an ignored or
    stateless session imports nothing (the reason is returned).
    """
    skip = write_skip(settings, address.session_key)
    if skip is not None:
        return skip
    options = BootstrapOptions.from_settings(settings, storage, transcript_format)
    return bootstrap_transcript(
        transaction, address.tenant_id, address.session_key, address.session_id, transcript, options
    )


def bootstrap_transcript(
    transaction: Transaction,
    tenant_id: str,
    session_key: str,
    session_id: str | None,
    transcript: bytes,
    options: BootstrapOptions | None = None,
) -> BootstrapResult:
    """Import what ``transcript`` holds beyond the anchor, one short transaction per chunk."""
    options = options or BootstrapOptions()
    with transaction() as session:
        conversation = resolve_for_write(
            session,
            tenant_id,
            session_key,
            session_id,
            retain_depth=options.new_session_retain_depth,
        )
        conversation_id, stored = conversation.id, conversation.bootstrap_checkpoint
    # Parsing is the slow part and needs no database: no transaction is open.
    parsed_run = prepare_transcript(transcript, Checkpoint.from_json(stored), options)
    run = _ImportRun(tenant_id, session_key, session_id, conversation_id, options, parsed_run)
    while not run.import_chunk(transaction, transcript):
        pass
    assert run.plan is not None  # the first chunk always plans
    parsed = parsed_run.parsed
    return BootstrapResult(
        conversation_id=conversation_id,
        imported=run.imported,
        duplicates=run.duplicates,
        anchor=run.plan.anchor,
        anchor_seq=run.plan.anchor_seq,
        format=parsed.format,
        transcript_messages=len(parsed.messages),
        file_ids=tuple(run.file_ids),
        skipped=dict(parsed.stats.skipped),
        malformed_lines=parsed.stats.malformed_lines,
    )


@dataclass(frozen=True, slots=True)
class PreparedTranscript:
    checkpoint: Checkpoint | None
    parsed: ParsedTranscript
    prepared: list[PreparedMessage]
    plan: ImportPlan | None  # known without the database when resuming from the checkpoint


def prepare_transcript(
    transcript: bytes, checkpoint: Checkpoint | None, options: BootstrapOptions
) -> PreparedTranscript:
    """The transcript parsed and its messages prepared as ingest would (no database)."""
    resume = checkpoint.resume_point(transcript, options.transcript_format) if checkpoint else None
    parsed = parse_transcript(transcript, options.transcript_format, resume=resume)
    prepared = [
        prepare_message(
            m.incoming(), f"transcript entry {m.entry_id or i}", options.max_message_chars
        )
        for i, m in enumerate(parsed.messages)
    ]
    plan: ImportPlan | None = None
    if resume is not None and checkpoint is not None:
        # The transcript is the one read before plus an appended part, and only
        # that part was parsed: every message in it follows the anchor.
        plan = ImportPlan("checkpoint", None, checkpoint.anchor_seq, tuple(range(len(prepared))))
    return PreparedTranscript(checkpoint, parsed, prepared, plan)


@dataclass(slots=True)
class _ImportRun:
    """The chunked import of one bootstrap: what is planned and what is done so far."""

    tenant_id: str
    session_key: str
    session_id: str | None
    conversation_id: int
    options: BootstrapOptions
    source: PreparedTranscript
    plan: ImportPlan | None = None
    done: int = 0
    imported: int = 0
    duplicates: int = 0
    newest_seq: int | None = None
    file_ids: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.plan = self.source.plan

    def import_chunk(self, transaction: Transaction, transcript: bytes) -> bool:
        """Import the next chunk in its own transaction; True once the last one is in."""
        prepared, options = self.source.prepared, self.options
        with transaction() as session:
            if self.plan is None:
                # Under the write lock of the first chunk: what it reads stays true.
                repo = TranscriptRepository(session)
                self.plan = find_anchor(
                    repo,
                    self.conversation_id,
                    self.source.parsed,
                    prepared,
                    options.max_unanchored,
                    options.max_unanchored_tokens,
                )
            rest = self.plan.indices[self.done :]
            chunk = rest[: _chunk_length(rest, prepared, options)]
            result = ingest_messages(
                session,
                self.tenant_id,
                self.session_key,
                self.session_id,
                [prepared[i] for i in chunk],
                large_files=options.large_files,
                new_session_retain_depth=options.new_session_retain_depth,
                quota=options.quota,
                secrets=options.secrets,
            )
            if result.conversation_id != self.conversation_id:
                # A new session id rotated the family between two chunks.
                raise Conflict("the session family changed during the bootstrap; retry it")
            self.done += len(chunk)
            self.imported += result.ingested
            self.duplicates += result.duplicates
            self.file_ids.extend(result.file_ids)
            if result.last_seq is not None:
                self.newest_seq = result.last_seq
            if self.done < len(self.plan.indices):
                return False
            self._save_checkpoint(session, transcript)
            return True

    def _save_checkpoint(self, session: Session, transcript: bytes) -> None:
        assert self.plan is not None
        checkpoint = self.source.checkpoint
        total = (checkpoint.imported_total if checkpoint else 0) + self.imported
        anchor_seq = self.newest_seq if self.newest_seq is not None else self.plan.anchor_seq
        TranscriptRepository(session).save_checkpoint(
            self.conversation_id,
            next_checkpoint(transcript, self.source.parsed, anchor_seq, total).to_json(),
        )


def _chunk_length(
    indices: Sequence[int], prepared: Sequence[PreparedMessage], options: BootstrapOptions
) -> int:
    """How many of ``indices`` the next chunk takes: at least one, within both bounds."""
    chars = 0
    for length, index in enumerate(indices[: options.chunk_messages]):
        chars += len(prepared[index].content)
        if length and chars > options.chunk_chars:
            return length
    return min(len(indices), options.chunk_messages)


def find_anchor(
    repo: TranscriptRepository,
    conversation_id: int,
    parsed: ParsedTranscript,
    prepared: list[PreparedMessage],
    max_unanchored: int,
    max_unanchored_tokens: int | None = None,
) -> ImportPlan:
    """By id, else by content, else a bounded import (see :mod:`lcm.transcripts.anchor`)."""
    ids = [m.client_id for m in parsed.messages]
    plan = by_ids(ids, repo.seqs_for_client_ids(conversation_id, ids))
    if plan is not None:
        return plan
    newest = repo.newest_messages(conversation_id, CONTENT_WINDOW)
    if newest:
        plan = by_content([identity(p.role, p.content) for p in prepared], newest)
        if plan is not None:
            return plan
    newest_at = repo.newest_created_at(conversation_id) if newest else None
    return unanchored(
        [p.created_at for p in prepared],
        newest_at,
        max_unanchored,
        [p.token_count for p in prepared],
        max_unanchored_tokens,
    )

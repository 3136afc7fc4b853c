"""Bootstrap: reconcile a gateway's transcript with the stored conversation, never duplicating.

Runs in the caller's transaction and holds the conversation's row lock (the
same lock ingest takes) from the first read to the commit, so two bootstraps
of one conversation, or a bootstrap and a live ingest, run one after the
other: the second sees the first's messages and checkpoint and imports only
what is still missing. Client ids make a repeated message a duplicate
whatever happens, so even a lost checkpoint cannot duplicate.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from lcm.conversations.service import resolve_for_write
from lcm.files.extraction import LargeFileExtractor
from lcm.ingest.content import PreparedMessage, prepare_message
from lcm.ingest.service import ingest_messages
from lcm.settings import Settings
from lcm.transcripts.checkpoint import Checkpoint, next_checkpoint
from lcm.transcripts.model import FormatChoice, ParsedTranscript, TranscriptFormat
from lcm.transcripts.parse import parse_transcript
from lcm.transcripts.reconcile import (
    AnchorKind,
    ImportPlan,
    by_content,
    by_ids,
    identity,
    unanchored,
)
from lcm.transcripts.repository import TranscriptRepository

# Newest stored messages compared by content when no id matches.
CONTENT_WINDOW = 200


@dataclass(frozen=True, slots=True)
class BootstrapOptions:
    transcript_format: FormatChoice = "auto"
    max_unanchored: int = 100
    max_message_chars: int = 2_000_000
    large_files: LargeFileExtractor | None = None
    new_session_retain_depth: int = -1

    @classmethod
    def from_settings(
        cls, settings: Settings, transcript_format: FormatChoice = "auto"
    ) -> BootstrapOptions:
        """Options for ``settings`` (pass the tenant's effective settings)."""
        return cls(
            transcript_format=transcript_format,
            max_unanchored=settings.bootstrap_max_unanchored,
            max_message_chars=settings.max_message_chars,
            large_files=LargeFileExtractor.from_settings(settings),
            new_session_retain_depth=settings.new_session_retain_depth,
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


def bootstrap_transcript(
    session: Session,
    tenant_id: str,
    session_key: str,
    session_id: str | None,
    transcript: bytes,
    options: BootstrapOptions | None = None,
) -> BootstrapResult:
    """Import what ``transcript`` holds beyond the anchor; the caller commits."""
    options = options or BootstrapOptions()
    conversation = resolve_for_write(
        session,
        tenant_id,
        session_key,
        session_id,
        retain_depth=options.new_session_retain_depth,
    )
    repo = TranscriptRepository(session)
    checkpoint = Checkpoint.from_json(conversation.bootstrap_checkpoint)
    resume = checkpoint.resume_point(transcript, options.transcript_format) if checkpoint else None
    parsed = parse_transcript(transcript, options.transcript_format, resume=resume)
    prepared = [
        prepare_message(
            m.incoming(), f"transcript entry {m.entry_id or i}", options.max_message_chars
        )
        for i, m in enumerate(parsed.messages)
    ]
    if resume is not None and checkpoint is not None:
        # The transcript is the one read before plus an appended part, and only
        # that part was parsed: every message in it follows the anchor.
        plan = ImportPlan("checkpoint", None, checkpoint.anchor_seq, tuple(range(len(prepared))))
    else:
        plan = find_anchor(repo, conversation.id, parsed, prepared, options.max_unanchored)
    result = ingest_messages(
        session,
        tenant_id,
        session_key,
        session_id,
        [prepared[i] for i in plan.indices],
        large_files=options.large_files,
        new_session_retain_depth=options.new_session_retain_depth,
    )
    newest_seq = result.last_seq if result.last_seq is not None else plan.anchor_seq
    total = (checkpoint.imported_total if checkpoint else 0) + result.ingested
    repo.save_checkpoint(
        conversation.id, next_checkpoint(transcript, parsed, newest_seq, total).to_json()
    )
    return BootstrapResult(
        conversation_id=conversation.id,
        imported=result.ingested,
        duplicates=result.duplicates,
        anchor=plan.anchor,
        anchor_seq=plan.anchor_seq,
        format=parsed.format,
        transcript_messages=len(parsed.messages),
        file_ids=result.file_ids,
        skipped=dict(parsed.stats.skipped),
        malformed_lines=parsed.stats.malformed_lines,
    )


def find_anchor(
    repo: TranscriptRepository,
    conversation_id: int,
    parsed: ParsedTranscript,
    prepared: list[PreparedMessage],
    max_unanchored: int,
) -> ImportPlan:
    """By id, else by content, else a bounded import (see :mod:`lcm.transcripts.reconcile`)."""
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
    return unanchored([p.created_at for p in prepared], newest_at, max_unanchored)

"""What importing a transcript would do, worked out without writing (``lcm import --dry-run``).

The transcript is parsed and prepared exactly as the import would, the
anchor found against the stored conversation in a read-only session, and
the payloads that would become stored files counted by the same extractor
run over a storage that keeps nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from lcm.content import parse_timestamp
from lcm.conversations.service import resolve_for_read
from lcm.errors import InvalidInput, NotFound
from lcm.files.extraction import LargeFileExtractor
from lcm.transcripts.model import FormatChoice
from lcm.transcripts.parse import parse_transcript, peek
from lcm.transcripts.repository import TranscriptRepository
from lcm.transcripts.service import BootstrapOptions, find_anchor, prepare_transcript

ReadSession = Callable[[], AbstractContextManager[Session]]


@dataclass(frozen=True, slots=True)
class ImportPreview:
    format: str
    session_id: str | None
    messages: int  # in the transcript
    would_import: int
    anchor: str  # how the stored conversation was matched; "new" if there is none
    large_files: int  # payloads that would be stored as files
    first_at: datetime | None
    last_at: datetime | None
    malformed_lines: int


class _KeepNothing:
    """A file storage that stores nothing: the extractor's decisions, without their writes."""

    def put(self, tenant_id: str, sha256: str, data: bytes) -> str:
        return f"dry-run:{sha256}"

    def get(self, uri: str) -> bytes:
        raise NotFound("a dry run stores no file")

    def delete(self, uri: str) -> None:
        return None


def preview_transcript(
    read_session: ReadSession,
    tenant_id: str,
    session_key: str,
    data: bytes,
    options: BootstrapOptions,
) -> ImportPreview:
    """What :func:`~lcm.transcripts.importer.import_transcript` would import of ``data``."""
    _fmt, _version, session_id = peek(data)
    source = prepare_transcript(data, None, options)
    prepared = source.prepared
    with read_session() as session:
        try:
            conversation = resolve_for_read(session, tenant_id, session_key, session_id)
        except NotFound:
            indices, anchor = tuple(range(len(prepared))), "new"
        else:
            plan = find_anchor(
                TranscriptRepository(session),
                conversation.id,
                source.parsed,
                prepared,
                options.max_unanchored,
                options.max_unanchored_tokens,
            )
            indices, anchor = plan.indices, str(plan.anchor)
    files = 0
    if options.large_files is not None:
        counting = LargeFileExtractor(
            _KeepNothing(), options.large_files.threshold, options.large_files.image_threshold
        )
        files = len(counting.extract(tenant_id, [prepared[i] for i in indices])[1])
    times = [p.created_at for p in prepared if p.created_at is not None]
    return ImportPreview(
        format=source.parsed.format,
        session_id=session_id,
        messages=len(prepared),
        would_import=len(indices),
        anchor=anchor,
        large_files=files,
        first_at=min(times, default=None),
        last_at=max(times, default=None),
        malformed_lines=source.parsed.stats.malformed_lines,
    )


def newest_time(data: bytes, transcript_format: FormatChoice = "auto") -> datetime | None:
    """The newest message time a transcript records (None: it records none)."""
    newest: datetime | None = None
    for message in parse_transcript(data, transcript_format).messages:
        try:
            at = parse_timestamp(message.created_at, "created_at")
        except InvalidInput:
            continue  # the import refuses it too; for choosing files it only has no time
        if at is not None and (newest is None or at > newest):
            newest = at
    return newest

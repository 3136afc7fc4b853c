"""Plain data shared by the transcript parsers, reconciliation and the bootstrap service."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from lcm.content import IncomingMessage

TranscriptFormat = Literal["openclaw", "claude-code"]
FormatChoice = Literal["auto", "openclaw", "claude-code"]
FORMATS: tuple[TranscriptFormat, ...] = ("openclaw", "claude-code")


@dataclass(frozen=True, slots=True)
class TranscriptMessage:
    """One transcript message, converted to what ``/messages`` accepts.

    ``client_id`` is the transcript's own entry id where it has one (pi v2+
    ``id``, Claude Code ``uuid``), so a gateway that also sends live turns with
    those ids is recognised; pi v1 entries have none and get a hash of their
    content (``pi1:…``), stable across re-reads of the same file.
    """

    client_id: str
    role: str
    content: str | list[dict[str, Any]]
    created_at: str | int | float | None
    entry_id: str | None = None
    # What wrote an assistant message, when the transcript says.
    provider: str | None = None
    model: str | None = None

    def incoming(self) -> IncomingMessage:
        return IncomingMessage(
            self.role,
            self.content,
            self.client_id,
            self.created_at,
            provider=self.provider,
            model=self.model,
        )


@dataclass(slots=True)
class ParseStats:
    """What a parse saw besides the messages it kept (for operators and tests)."""

    lines: int = 0
    malformed_lines: int = 0
    # Entry kinds recognised and deliberately not stored as messages, e.g.
    # "compaction", "model_change", "sidechain", "compact_summary".
    skipped: Counter[str] = field(default_factory=Counter)
    # Entries of the tree that are not on the active branch (pi v2+).
    off_branch: int = 0


@dataclass(frozen=True, slots=True)
class ResumePoint:
    """Where an earlier bootstrap stopped reading a transcript (from its checkpoint)."""

    offset: int
    format: TranscriptFormat
    version: int
    session_id: str | None = None
    sidechain_only: bool = False


@dataclass(frozen=True, slots=True)
class ParsedTranscript:
    """Messages of a transcript's active branch in order, and how far the read got.

    ``complete_bytes`` is the absolute byte offset just past the last
    newline-terminated line: a trailing line without its newline may still be
    being written by the gateway, so the next incremental read starts before it.
    """

    format: TranscriptFormat
    version: int
    session_id: str | None
    messages: tuple[TranscriptMessage, ...]
    stats: ParseStats
    complete_bytes: int
    sidechain_only: bool = False

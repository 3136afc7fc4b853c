"""One entry point for every transcript format: detect it, then parse all or only what is new."""

from __future__ import annotations

from collections.abc import Sequence

from lcm.errors import InvalidInput
from lcm.transcripts import claude_code, openclaw
from lcm.transcripts.jsonl import Line, read_lines
from lcm.transcripts.model import (
    FormatChoice,
    ParsedTranscript,
    ParseStats,
    ResumePoint,
    TranscriptFormat,
)

_CLAUDE_ONLY_TYPES = frozenset(
    {"file-history-snapshot", "queue-operation", "progress", "summary", "system"}
)
_SNIFF_LINES = 50


def detect_format(lines: Sequence[Line]) -> TranscriptFormat:
    """Tell the format from the content (file names and metadata are not reliable)."""
    for line in lines[:_SNIFF_LINES]:
        value = line.value
        kind = value.get("type")
        if kind == "session" or (kind == "message" and isinstance(value.get("message"), dict)):
            return "openclaw"
        if kind in claude_code.MESSAGE_TYPES and isinstance(value.get("message"), dict):
            return "claude-code"
        if kind in _CLAUDE_ONLY_TYPES or "sessionId" in value:
            return "claude-code"
    raise InvalidInput(
        "unrecognised transcript: expected OpenClaw/pi session JSONL or Claude Code JSONL"
    )


def parse_transcript(
    data: bytes, transcript_format: FormatChoice = "auto", *, resume: ResumePoint | None = None
) -> ParsedTranscript:
    """The messages of ``data`` (or of what was appended after ``resume.offset``)."""
    read = read_lines(data, resume.offset if resume else 0)
    stats = ParseStats(lines=read.total, malformed_lines=read.malformed)
    if resume is not None:
        fmt: TranscriptFormat = resume.format
    elif transcript_format == "auto":
        fmt = detect_format(read.lines)
    else:
        fmt = transcript_format
    if fmt == "openclaw":
        header = None if resume else openclaw.header_of(read.lines)
        version = resume.version if resume else openclaw.session_version(header)
        entries = [ln.value for ln in read.lines if ln.value.get("type") != "session"]
        session_id = resume.session_id if resume else _str(header.get("id") if header else None)
        messages = openclaw.parse_entries(entries, version, stats)
        return ParsedTranscript(fmt, version, session_id, tuple(messages), stats, read.complete_end)
    sidechain_only = resume.sidechain_only if resume else claude_code.is_sidechain_only(read.lines)
    session_id = resume.session_id if resume else claude_code.session_id_of(read.lines)
    messages = claude_code.parse_lines(read.lines, stats, sidechain_only=sidechain_only)
    return ParsedTranscript(
        fmt, 1, session_id, tuple(messages), stats, read.complete_end, sidechain_only
    )


def peek(data: bytes) -> tuple[TranscriptFormat, int, str | None]:
    """Format, version and session id from the first lines, without a full parse."""
    end = 0
    for _ in range(_SNIFF_LINES):
        newline = data.find(b"\n", end)
        if newline < 0:
            end = len(data)
            break
        end = newline + 1
    lines = read_lines(data[:end]).lines
    fmt = detect_format(lines)
    if fmt == "openclaw":
        header = openclaw.header_of(lines)
        return fmt, openclaw.session_version(header), _str(header.get("id") if header else None)
    return fmt, 1, claude_code.session_id_of(lines)


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None

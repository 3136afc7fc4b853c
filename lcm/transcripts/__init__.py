"""Gateway transcripts: parsing session JSONL files and reconciling them with stored history.

Two families of formats are read: OpenClaw / pi session files (versions 1 to 3)
and Claude Code transcripts. Both become :class:`TranscriptMessage` values in
the shape the ingest path accepts, so a bootstrap stores messages exactly as a
gateway's live ``/messages`` calls would.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lcm.exports import lazy_exports

if TYPE_CHECKING:
    from lcm.transcripts.importer import import_transcript
    from lcm.transcripts.model import (
        FORMATS,
        FormatChoice,
        ParsedTranscript,
        ParseStats,
        TranscriptMessage,
    )
    from lcm.transcripts.parse import detect_format, parse_transcript
    from lcm.transcripts.preview import newest_time, preview_transcript
    from lcm.transcripts.repository import TranscriptRepository
    from lcm.transcripts.service import (
        BootstrapOptions,
        BootstrapResult,
        bootstrap_session,
        bootstrap_transcript,
        tool_pairs,
    )

__all__ = [
    "FORMATS",
    "BootstrapOptions",
    "BootstrapResult",
    "FormatChoice",
    "ParseStats",
    "ParsedTranscript",
    "TranscriptMessage",
    "TranscriptRepository",
    "bootstrap_session",
    "bootstrap_transcript",
    "detect_format",
    "import_transcript",
    "newest_time",
    "parse_transcript",
    "preview_transcript",
    "tool_pairs",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "lcm.transcripts.importer": ("import_transcript",),
        "lcm.transcripts.model": (
            "FORMATS",
            "FormatChoice",
            "ParseStats",
            "ParsedTranscript",
            "TranscriptMessage",
        ),
        "lcm.transcripts.parse": ("detect_format", "parse_transcript"),
        "lcm.transcripts.preview": ("newest_time", "preview_transcript"),
        "lcm.transcripts.repository": ("TranscriptRepository",),
        "lcm.transcripts.service": (
            "BootstrapOptions",
            "BootstrapResult",
            "bootstrap_session",
            "bootstrap_transcript",
            "tool_pairs",
        ),
    },
)

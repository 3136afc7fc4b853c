"""Gateway transcripts: parsing session JSONL files and reconciling them with stored history.

Two families of formats are read: OpenClaw / pi session files (versions 1 to 3)
and Claude Code transcripts. Both become :class:`TranscriptMessage` values in
the shape the ingest path accepts, so a bootstrap stores messages exactly as a
gateway's live ``/messages`` calls would.
"""

from lcm.transcripts.model import ParsedTranscript, ParseStats, TranscriptMessage
from lcm.transcripts.parse import detect_format, parse_transcript

__all__ = [
    "ParseStats",
    "ParsedTranscript",
    "TranscriptMessage",
    "detect_format",
    "parse_transcript",
]

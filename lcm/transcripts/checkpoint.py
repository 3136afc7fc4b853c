"""The bootstrap checkpoint: how far a conversation's transcript has been read.

Stored as JSON in ``conversations.bootstrap_checkpoint``. It names a byte
offset and the SHA-256 of the transcript up to it. When the next transcript
starts with exactly those bytes, only what was appended is parsed; when it
does not (the gateway rewrote, migrated or replaced the file), the checkpoint
is ignored and the anchor is searched for from scratch.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from typing import Any

from lcm.transcripts.model import FORMATS, ParsedTranscript, ResumePoint

CHECKPOINT_VERSION = 1


@dataclass(frozen=True, slots=True)
class Checkpoint:
    offset: int
    sha256: str
    format: str
    version: int
    session_id: str | None
    sidechain_only: bool
    # Seq of the newest stored message that came from (or matched) the transcript.
    anchor_seq: int | None
    imported_total: int

    def to_json(self) -> dict[str, Any]:
        return {"v": CHECKPOINT_VERSION, **asdict(self)}

    @classmethod
    def from_json(cls, value: dict[str, Any] | None) -> Checkpoint | None:
        if not isinstance(value, dict) or value.get("v") != CHECKPOINT_VERSION:
            return None
        try:
            return cls(
                offset=int(value["offset"]),
                sha256=str(value["sha256"]),
                format=str(value["format"]),
                version=int(value["version"]),
                session_id=value.get("session_id"),
                sidechain_only=bool(value.get("sidechain_only", False)),
                anchor_seq=value.get("anchor_seq"),
                imported_total=int(value.get("imported_total", 0)),
            )
        except (KeyError, TypeError, ValueError):
            return None  # an unreadable checkpoint only costs a full read

    def resume_point(self, data: bytes, requested_format: str) -> ResumePoint | None:
        """Where to resume reading ``data``, or None when it is not the transcript read before."""
        if self.format not in FORMATS or requested_format not in ("auto", self.format):
            return None
        if len(data) < self.offset or prefix_digest(data, self.offset) != self.sha256:
            return None
        return ResumePoint(
            self.offset,
            self.format,
            self.version,
            self.session_id,
            self.sidechain_only,
        )


def prefix_digest(data: bytes, length: int) -> str:
    return hashlib.sha256(memoryview(data)[:length]).hexdigest()


def next_checkpoint(
    data: bytes,
    parsed: ParsedTranscript,
    anchor_seq: int | None,
    imported_total: int,
) -> Checkpoint:
    return Checkpoint(
        offset=parsed.complete_bytes,
        sha256=prefix_digest(data, parsed.complete_bytes),
        format=parsed.format,
        version=parsed.version,
        session_id=parsed.session_id,
        sidechain_only=parsed.sidechain_only,
        anchor_seq=anchor_seq,
        imported_total=imported_total,
    )

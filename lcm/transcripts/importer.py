"""Importing whole transcript files from disk (``lcm import``, the transcripts benchmark).

A file is fed to the same bootstrap the HTTP endpoint runs, in growing
prefixes of ``LINES_PER_CHUNK`` lines, so progress is visible and every
prefix after the first goes through the checkpoint's incremental read. Each
bootstrap commits in short chunks of its own, so a crash keeps what
committed. Tree-shaped pi sessions (v2+) are read in one piece, because a
prefix of a tree can end on a branch the whole file later abandons.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from lcm.transcripts.parse import peek
from lcm.transcripts.service import (
    BootstrapOptions,
    BootstrapResult,
    Transaction,
    bootstrap_transcript,
)

LINES_PER_CHUNK = 200


@dataclass(frozen=True, slots=True)
class ImportOutcome:
    conversation_id: int
    format: str
    session_id: str | None
    transcript_messages: int
    imported: int
    duplicates: int
    file_ids: tuple[str, ...]
    seconds: float


def chunk_ends(data: bytes, lines_per_chunk: int) -> list[int]:
    """Offsets just past every ``lines_per_chunk``-th newline, then the end of ``data``."""
    ends: list[int] = []
    position, count = 0, 0
    while (newline := data.find(b"\n", position)) >= 0:
        position, count = newline + 1, count + 1
        if count % lines_per_chunk == 0:
            ends.append(position)
    if not ends or ends[-1] != len(data):
        ends.append(len(data))
    return ends


def import_transcript(
    transaction: Transaction,
    tenant_id: str,
    session_key: str,
    data: bytes,
    options: BootstrapOptions,
    *,
    on_chunk: Callable[[BootstrapResult], None] | None = None,
) -> ImportOutcome:
    """Import one transcript file under ``session_key`` (its own session id, if it has one)."""
    started = time.perf_counter()
    fmt, version, session_id = peek(data)
    tree = fmt == "openclaw" and version >= 2
    ends = [len(data)] if tree else chunk_ends(data, LINES_PER_CHUNK)
    results: list[BootstrapResult] = []
    for end in ends:
        result = bootstrap_transcript(
            transaction, tenant_id, session_key, session_id, data[:end], options
        )
        results.append(result)
        if on_chunk is not None:
            on_chunk(result)
    return ImportOutcome(
        conversation_id=results[-1].conversation_id,
        format=fmt,
        session_id=session_id,
        transcript_messages=sum(r.transcript_messages for r in results),
        imported=sum(r.imported for r in results),
        duplicates=sum(r.duplicates for r in results),
        file_ids=tuple(f for r in results for f in r.file_ids),
        seconds=time.perf_counter() - started,
    )

"""Finding the anchor: where a transcript and the stored conversation last agree.

Pure functions over plain data, so every rule is unit-tested without a database.
The anchor is the newest transcript message that is already stored; only what
follows it is imported, so a bootstrap never duplicates and never reorders.

1. **By id.** Transcript entry ids are stored as client ids, so the newest
   transcript message whose id is stored is the anchor.
2. **By content.** When no id matches (pi rewrote a v1 file as v3 with new
   ids, or the gateway sent live turns under ids of its own), messages are
   compared by role and normalized text. Starting from the newest stored
   message, the newest transcript position holding the same text is accepted
   if the stored messages before it also precede it in the transcript (up to
   ``CONTENT_CONFIRM`` of them), so a lone "ok" cannot anchor on the wrong "ok".
3. **None.** An empty conversation takes the whole transcript. Otherwise the
   two share nothing recognisable, so the import is bounded: only messages newer
   than the newest stored one, at most ``max_unanchored`` of those and at
   most ``max_unanchored_tokens`` tokens of them (the newest).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

AnchorKind = Literal["checkpoint", "id", "content", "none", "empty"]
CONTENT_CONFIRM = 2


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message already in the conversation, as content reconciliation needs it."""

    seq: int
    role: str
    content: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class ImportPlan:
    """Which transcript messages to import (by index), and the anchor that decided it."""

    anchor: AnchorKind
    anchor_index: int | None
    anchor_seq: int | None
    indices: tuple[int, ...]


def identity(role: str, content: str) -> str:
    """Role and whitespace-normalized text; tool output counts as user input.

    ``tool`` folds into ``user`` because a gateway may send a tool result in
    either shape (a ``tool`` message, or a ``user`` message with a
    ``tool_result`` block); the text extraction is the same.
    """
    folded = "user" if role == "tool" else role
    text = " ".join(content.split())
    return hashlib.sha1(f"{folded}\x00{text}".encode("utf-8", "replace")).hexdigest()


def by_ids(client_ids: Sequence[str], stored: Mapping[str, int]) -> ImportPlan | None:
    """Anchor on the newest transcript message whose id is stored (``stored``: id → seq)."""
    for index in range(len(client_ids) - 1, -1, -1):
        seq = stored.get(client_ids[index])
        if seq is not None:
            return ImportPlan("id", index, seq, tuple(range(index + 1, len(client_ids))))
    return None


def by_content(
    identities: Sequence[str], newest_first: Sequence[StoredMessage]
) -> ImportPlan | None:
    """Anchor on the newest stored message found, confirmed by the ones before it."""
    positions: dict[str, list[int]] = {}
    for index, ident in enumerate(identities):
        positions.setdefault(ident, []).append(index)
    stored = [identity(m.role, m.content) for m in newest_first]
    for offset, ident in enumerate(stored):
        for index in reversed(positions.get(ident, ())):
            if _confirmed(identities, index, stored, offset):
                return ImportPlan(
                    "content",
                    index,
                    newest_first[offset].seq,
                    tuple(range(index + 1, len(identities))),
                )
    return None


def _confirmed(identities: Sequence[str], index: int, stored: Sequence[str], offset: int) -> bool:
    """The stored messages just before ``stored[offset]`` precede ``index`` in the transcript."""
    wanted = stored[offset + 1 : offset + 1 + CONTENT_CONFIRM]
    return all(
        index - 1 - k >= 0 and identities[index - 1 - k] == ident for k, ident in enumerate(wanted)
    )


def unanchored(
    created_at: Sequence[datetime | None],
    newest_stored_at: datetime | None,
    max_unanchored: int,
    token_counts: Sequence[int] | None = None,
    max_tokens: int | None = None,
) -> ImportPlan:
    """No anchor: everything into an empty conversation, else a bounded, newer-only tail.

    The tail is the newest messages within both bounds: at most
    ``max_unanchored`` of them, and (``max_tokens`` given) at most that many
    tokens in all; a message is taken whole or not at all.
    """
    if newest_stored_at is None:
        return ImportPlan("empty", None, None, tuple(range(len(created_at))))
    # A message without a timestamp cannot be placed in time; it counts as new.
    newer = [i for i, at in enumerate(created_at) if at is None or at > newest_stored_at]
    tail = newer[-max_unanchored:] if max_unanchored else []
    if max_tokens is not None and token_counts is not None:
        tail = _newest_within(tail, token_counts, max_tokens)
    return ImportPlan("none", None, None, tuple(tail))


def _newest_within(indices: list[int], token_counts: Sequence[int], max_tokens: int) -> list[int]:
    """The newest of ``indices`` whose tokens together stay within ``max_tokens``."""
    total, start = 0, len(indices)
    while start > 0 and total + token_counts[indices[start - 1]] <= max_tokens:
        start -= 1
        total += token_counts[indices[start]]
    return indices[start:]

"""Recording where secrets sit in stored text, in the caller's transaction.

Ingest, bootstrap, import and large files hand their texts here before they
commit, so a message and its spans commit together or not at all. The text
is never changed: only spans are written, with a keyed fingerprint of each
value (never the value) that gives the same value the same ordinal
throughout a conversation.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from sqlalchemy.orm import Session

from lcm.context import MessageView
from lcm.secrets.detector import Finding, detect
from lcm.secrets.masking import SecretSpan, content_spans, is_placeholder, mask_text
from lcm.secrets.repository import SecretSpanRepository
from lcm.secrets.rules import NO_RULES, DetectionRules
from lcm.settings import Settings

# Parts whose text is scanned. Images carry "[image]", redacted thinking nothing.
SCANNED_PARTS = frozenset({"text", "tool_use", "tool_result", "thinking", "document", "file"})


class PartLike(Protocol):
    @property
    def part_type(self) -> str: ...

    @property
    def text(self) -> str: ...


@dataclass(frozen=True, slots=True)
class SecretScan:
    """Whether stored text is scanned, and the key its fingerprints are made with.

    Without a key (``secrets_fingerprint_key`` unset) the fingerprint is
    keyed by the tenant id: stable, but someone reading the database could
    confirm a guessed value; set a key in production.
    """

    enabled: bool = True
    key: bytes | None = None
    # The tenant's custom patterns and allow-list (effective settings).
    rules: DetectionRules = field(default=NO_RULES)

    @classmethod
    def of(cls, settings: Settings) -> SecretScan:
        key = settings.secrets_fingerprint_key
        return cls(
            settings.secrets_detection,
            key.get_secret_value().encode("utf-8") if key else None,
            DetectionRules.of(settings),
        )

    def fingerprint(self, tenant_id: str, conversation_id: int, value: str) -> str:
        """A keyed hash of ``value`` within one conversation (it links nothing across them)."""
        key = self.key or f"lcm-secret-fingerprint:{tenant_id}".encode()
        message = f"{conversation_id}\x00{value}".encode("utf-8", "surrogatepass")
        return hmac.new(key, message, hashlib.sha256).hexdigest()


# Detection on, fingerprints keyed by the tenant id: for callers without settings.
DEFAULT_SCAN = SecretScan()


@dataclass(frozen=True, slots=True)
class ScannedText:
    """A stored text and where it is: a message's part, or a large file."""

    text: str
    message_id: int | None = None
    part: int | None = None
    file_id: str | None = None


def message_texts(
    message_ids: Sequence[int], parts: Sequence[Sequence[PartLike]]
) -> Iterator[ScannedText]:
    """The scannable part texts of messages (``parts[i]`` are message ``message_ids[i]``'s)."""
    for message_id, message_parts in zip(message_ids, parts, strict=True):
        for ordinal, part in enumerate(message_parts):
            if part.part_type in SCANNED_PARTS and part.text:
                yield ScannedText(part.text, message_id, ordinal)


def record_secrets(
    session: Session,
    tenant_id: str,
    conversation_id: int,
    texts: Iterable[ScannedText],
    scan: SecretScan,
) -> int:
    """Detect secrets in ``texts`` and store their spans; return how many were stored.

    Ordinals are taken as ``max + 1`` per new value: every caller holds the
    conversation's row lock (``target_for_write``, the import's locked
    target), so no two writers number the same conversation at once.
    """
    if not scan.enabled:
        return 0
    found = _found(tenant_id, conversation_id, texts, scan)
    if not found:
        return 0
    repo = SecretSpanRepository(session)
    fingerprints = {fp for _, _, fp in found}
    ordinals = repo.ordinals(tenant_id, conversation_id, fingerprints)
    last = repo.last_ordinal(tenant_id, conversation_id) if len(ordinals) < len(fingerprints) else 0
    rows, _ = _span_rows(tenant_id, conversation_id, found, ordinals, last)
    repo.insert(rows)
    return len(rows)


def rescan_messages(
    session: Session,
    tenant_id: str,
    conversation_id: int,
    message_ids: Collection[int],
    texts: Iterable[ScannedText],
    scan: SecretScan,
    floor: int,
) -> tuple[int, int]:
    """Replace the spans of ``message_ids`` with what ``scan`` finds in ``texts`` now.

    A value still found keeps its ordinal (looked up before the old spans
    go), so summaries written with ``[secret:kind#n]`` stay right; a value
    found anew is numbered above ``floor`` (the conversation's highest
    ordinal when its scan began), so no retired ordinal is given to another
    value. The caller holds the conversation's row lock, as ingest does.
    Returns the spans written and the highest ordinal now given.
    """
    repo = SecretSpanRepository(session)
    found = _found(tenant_id, conversation_id, texts, scan) if scan.enabled else []
    ordinals = repo.ordinals(tenant_id, conversation_id, {fp for _, _, fp in found})
    last = max(floor, repo.last_ordinal(tenant_id, conversation_id))
    repo.delete_message_spans(tenant_id, message_ids)
    rows, last = _span_rows(tenant_id, conversation_id, found, ordinals, last)
    repo.insert(rows)
    return len(rows), last


_Found = list[tuple[ScannedText, Finding, str]]


def _found(
    tenant_id: str, conversation_id: int, texts: Iterable[ScannedText], scan: SecretScan
) -> _Found:
    return [
        (
            where,
            finding,
            scan.fingerprint(tenant_id, conversation_id, where.text[finding.start : finding.end]),
        )
        for where in texts
        for finding in detect(where.text, scan.rules)
    ]


def _span_rows(
    tenant_id: str, conversation_id: int, found: _Found, ordinals: dict[str, int], last: int
) -> tuple[list[dict[str, object]], int]:
    """The span rows of ``found``; a value without an ordinal gets ``last + 1`` (and so on)."""
    rows = []
    for where, finding, fp in found:
        if fp not in ordinals:
            last += 1
            ordinals[fp] = last
        rows.append(
            {
                "tenant_id": tenant_id,
                "conversation_id": conversation_id,
                "message_id": where.message_id,
                "part": where.part,
                "file_id": where.file_id,
                "char_offset": finding.start,
                "char_length": finding.length,
                "kind": finding.kind,
                "ordinal": ordinals[fp],
                "fingerprint": fp,
            }
        )
    return rows, last


def content_masks(
    session: Session, tenant_id: str, message_ids: Collection[int]
) -> dict[int, list[SecretSpan]]:
    """The spans of each message's joined ``content``, for those with any (one query if none)."""
    repo = SecretSpanRepository(session)
    by_message = repo.message_spans(tenant_id, message_ids)
    if not by_message:
        return {}
    lengths = repo.part_lengths(tenant_id, by_message)
    return {
        message_id: content_spans(lengths.get(message_id, []), spans)
        for message_id, spans in by_message.items()
    }


def erased_since(
    views: Mapping[int, MessageView], masks: Mapping[int, Sequence[SecretSpan]]
) -> int | None:
    """A message of ``views`` read before one of its secrets was erased, if any.

    An erasure (``lcm.secret_access``) writes the placeholder into the stored
    text and moves the spans onto it: ``masks`` (content spans read after
    it) then point into the new text while the view still holds the
    original, and masking one with the other could show the secret. A pass
    gives up on such a plan (it runs again on the new text).
    """
    for message_id, spans in masks.items():
        content = views[message_id].content
        if any(s.erased and not is_placeholder(content[s.offset : s.end]) for s in spans):
            return message_id
    return None


def mask_detected(text: str, rules: DetectionRules | None = None) -> str:
    """``text`` with whatever the detector finds in it masked, unnumbered (``[secret:kind]``).

    For text no span describes: a model's output, checked before it is
    stored, since a summary must never hold a secret (one quoted from a
    summary written before masking, or one the model made up).
    """
    found = detect(text, rules)
    if not found:
        return text
    return mask_text(text, [SecretSpan(None, f.start, f.length, f.kind, 0) for f in found])

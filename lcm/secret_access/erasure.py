"""Erasing a secret: its original replaced by its placeholder in the stored rows, for good.

After a leak the key is rotated and its old value should exist nowhere. An
erasure names spans (each standing for its value: every span of that value
in the conversation goes) or a value (every conversation of the tenant that
holds it). In each message holding it the part texts get the placeholder at
the span (the other spans of the part move with the text), the part payloads
and the joined content get it wherever the value appears, the token count
follows; the spans are marked erased and keep their ordinal, so
``[secret:aws_key#2]`` stays the same key everywhere. Summaries quoting the
value (written before masking) are rewritten too. Seqs, ids and links are
untouched. Search follows: Postgres' ``tsvector`` columns are generated from
the content, SQLite's FTS tables by their update triggers.

A large file holding the value is stored again without it
(:mod:`lcm.secret_access.file_erasure`); without a file storage (a caller
that has none) its spans are left and counted in ``Erased.file_spans``.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from lcm.db.models import Message, MessagePart, SecretSpan, utcnow
from lcm.errors import InvalidInput, NotFound
from lcm.files.storage import FileStorage
from lcm.message_cache import MESSAGE_CACHE, MessageCache
from lcm.secret_access.file_erasure import release_objects, rewrite_files
from lcm.secret_access.repository import SecretAccessRepository
from lcm.secret_access.rewrite import rewrite_part
from lcm.secrets import SecretScan, mask_values
from lcm.tokens import estimate_tokens

MAX_SPAN_IDS = 1000
Transaction = Callable[[], AbstractContextManager[Session]]


@dataclass(frozen=True, slots=True)
class ErasureRequest:
    """What to erase: the values of ``span_ids``, or ``value`` wherever the tenant holds it."""

    span_ids: tuple[int, ...] = ()
    value: str | None = None

    def checked(self) -> ErasureRequest:
        if bool(self.span_ids) == (self.value is not None):
            raise InvalidInput("give span_ids or a value (one of them)")
        if len(self.span_ids) > MAX_SPAN_IDS:
            raise InvalidInput(f"at most {MAX_SPAN_IDS} span ids")
        if self.value is not None and not self.value.strip():
            raise InvalidInput("the value is empty")
        return self


@dataclass
class Erased:
    """What an erasure changed (zero everywhere when it had been done before)."""

    conversation_ids: list[int] = field(default_factory=list)
    spans: int = 0
    messages: int = 0
    summaries: int = 0
    files: int = 0  # large files stored again without the value
    file_spans: int = 0  # spans in large files left as they are (no storage given)


def erase_secrets(
    transaction: Transaction,
    tenant_id: str,
    request: ErasureRequest,
    scan: SecretScan,
    storage: FileStorage | None = None,
) -> Erased:
    """Erase what ``request`` names, one conversation per transaction; safe to run again."""
    request = request.checked()
    with transaction() as session:
        targets = _targets(SecretAccessRepository(session), tenant_id, request, scan)
    erased = Erased()
    for conversation_id, fingerprints in sorted(targets.items()):
        released: set[str] = set()
        with transaction() as session:
            where = _Where(tenant_id, conversation_id, storage, released)
            _erase_in_conversation(session, where, fingerprints, erased)
        if storage is not None and released:
            with transaction() as session:  # committed: the old objects may go
                release_objects(SecretAccessRepository(session), storage, tenant_id, released)
    return erased


@dataclass(frozen=True, slots=True)
class _Where:
    tenant_id: str
    conversation_id: int
    storage: FileStorage | None
    released: set[str]


def _targets(
    repo: SecretAccessRepository, tenant_id: str, request: ErasureRequest, scan: SecretScan
) -> dict[int, set[str]]:
    """The fingerprints to erase, by conversation (a value's is keyed by each conversation)."""
    if request.value is not None:
        # A value inside a tool call's JSON input is stored (and fingerprinted) escaped.
        forms = {request.value, json.dumps(request.value, ensure_ascii=False)[1:-1]}
        return {
            conversation_id: {scan.fingerprint(tenant_id, conversation_id, v) for v in forms}
            for conversation_id in repo.conversations_with_spans(tenant_id)
        }
    found = repo.spans_by_id(tenant_id, request.span_ids)
    missing = sorted(set(request.span_ids) - {s.id for s in found})
    if missing:
        raise NotFound(f"no secret span {missing[0]}")
    targets: dict[int, set[str]] = defaultdict(set)
    for span in found:
        targets[span.conversation_id].add(span.fingerprint)
    return dict(targets)


def _erase_in_conversation(
    session: Session, where: _Where, fingerprints: set[str], erased: Erased
) -> None:
    repo = SecretAccessRepository(session)
    tenant_id, conversation_id = where.tenant_id, where.conversation_id
    # The conversation's row lock, first: ingest (target_for_write) and a
    # compaction pass's commit (_lock_and_fence) take it too. Under it no
    # message of the conversation gains spans (ingest numbers them under
    # it) and no pass commits, so the spans read next are all there are
    # and none moves before this commits. A pass that read the text before
    # this commit fails its own check afterwards (lcm.secrets.erased_since)
    # and runs again on the new text. Erased meanwhile: nothing to do.
    if not repo.lock_conversation(tenant_id, conversation_id):
        return
    spans = repo.spans_by_fingerprint(tenant_id, conversation_id, fingerprints)
    targets = [s for s in spans if s.erased_at is None]
    if not targets:
        return  # done before (or no such value here): erasure is idempotent
    message_ids = {s.message_id for s in targets if s.message_id is not None}
    values = (
        _rewrite_messages(repo, tenant_id, conversation_id, message_ids, targets, erased)
        if message_ids
        else {}
    )
    file_ids = {s.file_id for s in targets if s.file_id is not None}
    if file_ids and where.storage is not None:
        erase = {s.id for s in targets}
        count, found = rewrite_files(
            repo, where.storage, tenant_id, file_ids, erase, where.released
        )
        erased.spans += count
        erased.files += len(file_ids)
        values.update(found)
    elif file_ids:
        erased.file_spans += sum(1 for s in targets if s.file_id is not None)
        if not message_ids:
            return  # nothing was rewritten
    for summary in repo.summaries_holding(tenant_id, conversation_id, sorted(values)):
        content = mask_values(summary.content, values)
        if content != summary.content:
            summary.content = content
            erased.summaries += 1
    repo.bump_context_version(conversation_id)  # what assembly shows has changed
    session.flush()
    cache: MessageCache | None = session.info.get(MESSAGE_CACHE)
    if cache is not None:
        # This process's views; another's are caught as stale where they are
        # used (lcm.context_store.load_context, lcm.secrets.stale_views).
        cache.forget_conversations([conversation_id])
    erased.conversation_ids.append(conversation_id)


def _rewrite_messages(
    repo: SecretAccessRepository,
    tenant_id: str,
    conversation_id: int,
    message_ids: set[int],
    targets: Sequence[SecretSpan],
    erased: Erased,
) -> dict[str, str]:
    """Rewrite the messages holding ``targets``; return each erased value's placeholder."""
    erase = {s.id for s in targets}
    by_message: dict[int, list[SecretSpan]] = defaultdict(list)
    for span in repo.message_spans(tenant_id, message_ids):
        by_message[span.message_id or 0].append(span)
    parts: dict[int, list[MessagePart]] = defaultdict(list)
    for part in repo.parts(tenant_id, message_ids):
        parts[part.message_id].append(part)
    now = utcnow()
    values: dict[str, str] = {}
    for message in repo.messages(tenant_id, message_ids):
        found = _rewrite_message(message, parts[message.id], by_message[message.id], erase)
        values.update(found)
        for span in by_message[message.id]:
            if span.id in erase and span.erased_at is None:
                span.erased_at = now
                erased.spans += 1
        repo.set_item_tokens(conversation_id, message.id, message.token_count)
        erased.messages += 1
    return values


def _rewrite_message(
    message: Message, parts: Sequence[MessagePart], spans: Sequence[SecretSpan], erase: set[int]
) -> dict[str, str]:
    """Rewrite one message's parts, payloads and content; move its spans onto the new text."""
    values: dict[str, str] = {}
    by_part: dict[int, list[SecretSpan]] = defaultdict(list)
    for span in spans:
        if span.part is not None:
            by_part[span.part].append(span)
    for part in parts:
        on_part = by_part.get(part.ordinal, [])
        if not on_part:
            continue
        rewritten = rewrite_part(part.text, on_part, erase)
        values.update(rewritten.values)
        erase.update(rewritten.also_erased)
        part.text = rewritten.text
    values.update(_decoded(values))
    for part in parts:
        payload = mask_values(part.payload, values)
        if payload != part.payload:
            part.payload = payload
    content = mask_values(message.content, values)
    if content != message.content:
        # Only the text's share of the count changes (images are counted apart).
        delta = estimate_tokens(content) - estimate_tokens(message.content)
        message.token_count = max(message.token_count + delta, 0)
        message.content = content
    return values


def _decoded(values: dict[str, str]) -> Iterable[tuple[str, str]]:
    """A value as a ``tool_use`` text holds it (JSON-escaped), decoded: how payloads hold it."""
    for value, shown in list(values.items()):
        if "\\" in value:
            try:
                decoded = json.loads(f'"{value}"')
            except ValueError:
                continue
            if isinstance(decoded, str) and decoded:
                yield decoded, shown


__all__ = ["MAX_SPAN_IDS", "Erased", "ErasureRequest", "erase_secrets"]

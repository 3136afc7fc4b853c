"""Large files as the rest of LCM uses them: describe, summarize, search.

``load_file`` gives describe (``GET /v1/files/{id}``) the full content;
``summarize_file`` is the ``files.summarize`` job; ``grep_files`` lets the grep
tool search file contents. None of them commits: ``load_file`` and ``grep_files`` only read
through the caller's session, and ``summarize_file`` runs its short
transactions through the entrypoint's ``transaction`` factory.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from lcm.db.engine import Transaction
from lcm.db.models import LlmUsage
from lcm.errors import NotFound
from lcm.files.exploration import FileKind, classify, explore
from lcm.files.repository import LargeFileRepository
from lcm.files.storage import FileStorage
from lcm.settings import CompactionSettings
from lcm.summarize.policy import SummaryPolicy, thinking_of
from lcm.summarize.routing import model_route
from lcm.summarize.summarizer import CallUsage, Summarizer
from lcm.tenants.service import effective_settings, stored_overrides

STRUCTURE_MODEL = "structure"
PROSE_TARGET_TOKENS = 200
_SAMPLE_CHARS = 8_000


@dataclass(frozen=True, slots=True)
class StoredFile:
    """A large file's metadata and its full content (what describe returns)."""

    id: str
    conversation_id: int
    message_id: int | None
    name: str | None
    mime: str | None
    ext: str | None
    byte_size: int
    token_count: int
    sha256: str
    storage_uri: str
    exploration_summary: str | None
    created_at: datetime
    content: str
    # "base64" for images (their bytes, encoded), else "utf-8" (the text itself).
    encoding: str = "utf-8"


def is_image(mime: str | None) -> bool:
    return bool(mime) and str(mime).lower().startswith("image/")


@dataclass(frozen=True, slots=True)
class FileSummaryOutcome:
    file_id: str
    kind: FileKind
    model: str
    written: bool  # False when another job wrote the summary first


@dataclass(frozen=True, slots=True)
class FileMatch:
    file_id: str
    conversation_id: int
    line: int  # 1-based
    snippet: str
    created_at: datetime
    text: str = ""  # the whole matching line, for highlighting
    offset: int = 0  # where the line starts in the file's text (code points), for its spans


def load_file(session: Session, storage: FileStorage, tenant_id: str, file_id: str) -> StoredFile:
    """The file with its full content; ``NotFound`` for unknown ids and other tenants' files."""
    row = LargeFileRepository(session).get(file_id, tenant_id)
    if row is None:
        raise NotFound(f"no file {file_id!r}")
    return StoredFile(
        id=row.id,
        conversation_id=row.conversation_id,
        message_id=row.message_id,
        name=row.name,
        mime=row.mime,
        ext=row.ext,
        byte_size=row.byte_size,
        token_count=row.token_count,
        sha256=row.sha256,
        storage_uri=row.storage_uri,
        exploration_summary=row.exploration_summary,
        created_at=row.created_at,
        content=_content(storage.get(row.storage_uri), row.mime),
        encoding="base64" if is_image(row.mime) else "utf-8",
    )


def _content(data: bytes, mime: str | None) -> str:
    if is_image(mime):
        return base64.b64encode(data).decode("ascii")
    return data.decode("utf-8", "replace")


def summarize_file(
    transaction: Transaction,
    storage: FileStorage,
    summarizer: Summarizer | None,
    file_id: str,
    settings: CompactionSettings | None = None,
) -> FileSummaryOutcome | None:
    """Write a file's exploration summary; None when there is nothing to do.

    Safe to run twice: the summary is written only where none exists. No
    transaction is open while the file is read or the summarizer is called.
    Given the deployment's ``settings``, the tenant's effective ones choose
    the provider and models (``large_file_summary_*``) and thinking; without
    them only the tenant's own summary models are read.
    """
    with transaction() as session:
        row = LargeFileRepository(session).get(file_id)
        if row is None or row.exploration_summary is not None:
            return None
        tenant_id, conversation_id = row.tenant_id, row.conversation_id
        name, mime, ext, uri = row.name, row.mime, row.ext, row.storage_uri
        overrides = stored_overrides(session, tenant_id)
        effective = None if settings is None else effective_settings(session, tenant_id, settings)
    if is_image(mime):
        # An image is not text: no summarizer call, a plain description.
        described = f"Image ({mime}{f', {name}' if name else ''}) taken out of a message."
        with transaction() as session:
            written = LargeFileRepository(session).set_summary_if_missing(file_id, described)
        return FileSummaryOutcome(file_id, "prose", STRUCTURE_MODEL, written)
    text = storage.get(uri).decode("utf-8", "replace")
    kind = classify(name, mime, ext, text)
    summary: str | None = None
    model = STRUCTURE_MODEL
    usage: tuple[CallUsage, ...] = ()
    if kind == "prose" and summarizer is not None:
        instructions = file_instructions(name, len(text))
        result = summarizer.summarize(
            prose_sample(text),
            depth=0,
            target_tokens=PROSE_TARGET_TOKENS,
            policy=(
                SummaryPolicy.for_models(_tenant_models(overrides), instructions)
                if effective is None
                else SummaryPolicy.for_route(
                    model_route(effective, "file"), instructions, thinking_of(effective)
                )
            ),
        )
        usage = result.usage
        if result.escalation != "fallback":  # the provider failed: use the deterministic one
            summary, model = result.text, result.model
    if summary is None:
        summary = explore(kind, text, name, ext)
    with transaction() as session:
        written = LargeFileRepository(session).set_summary_if_missing(file_id, summary)
        if written:
            session.add_all(LlmUsage.from_calls(tenant_id, conversation_id, "file", usage))
    return FileSummaryOutcome(file_id, kind, model, written)


def _tenant_models(overrides: dict[str, Any]) -> tuple[str, ...]:
    """The tenant's own model order, or () for the deployment's."""
    if "summary_model" not in overrides and "summary_fallback_models" not in overrides:
        return ()
    primary = overrides.get("summary_model")
    fallbacks = overrides.get("summary_fallback_models") or []
    return tuple(m for m in (primary, *fallbacks) if m)


def prose_sample(text: str) -> str:
    """The start, middle and end of a long text: enough to say what it is."""
    if len(text) <= 3 * _SAMPLE_CHARS:
        return text
    middle = len(text) // 2 - _SAMPLE_CHARS // 2
    return "\n\n".join(
        [
            "[start of file]",
            text[:_SAMPLE_CHARS],
            "[middle of file]",
            text[middle : middle + _SAMPLE_CHARS],
            "[end of file]",
            text[-_SAMPLE_CHARS:],
        ]
    )


def file_instructions(name: str | None, chars: int) -> str:
    return (
        f"The source is not a conversation: it is one file{f' named {name}' if name else ''} "
        f"({chars:,} characters; long files are sampled at start, middle and end). Write an "
        "exploration summary for an agent that may need to open it later: what the document "
        "is, its sections and topics, the important names, numbers and dates, and any "
        "instructions or constraints it states. Do not quote long passages."
    )


def grep_files(
    session: Session,
    storage: FileStorage,
    conversation_ids: Sequence[int],
    matches: Callable[[str], bool],
    *,
    limit: int = 50,
    snippet_chars: int = 200,
    out_of_time: Callable[[], bool] = lambda: False,
    file_ids: Collection[str] = (),
) -> list[FileMatch]:
    """Lines of the conversations' stored files for which ``matches`` is true.

    The caller scopes ``conversation_ids`` to one tenant and supplies a safe
    matcher (the grep tool's regex guard or a plain substring test), and may
    stop the scan early with ``out_of_time`` (checked per file and every
    thousand lines). Given ``file_ids``, only those files are read.
    """
    found: list[FileMatch] = []
    for row in LargeFileRepository(session).for_conversations(conversation_ids):
        if out_of_time():
            return found
        if file_ids and row.id not in file_ids:
            continue
        if is_image(row.mime):
            continue  # bytes, not lines of text
        try:
            text = storage.get(row.storage_uri).decode("utf-8", "replace")
        except NotFound:
            continue  # a missing object must not hide matches in the others
        start = 0
        for number, ended in enumerate(text.splitlines(keepends=True), start=1):
            line, offset = ended.splitlines()[0], start  # the line without its break
            start += len(ended)
            if number % 1000 == 0 and out_of_time():
                return found
            if matches(line):
                found.append(
                    FileMatch(
                        row.id,
                        row.conversation_id,
                        number,
                        line[:snippet_chars],
                        row.created_at,
                        line,
                        offset,
                    )
                )
                if len(found) >= limit:
                    return found
    return found

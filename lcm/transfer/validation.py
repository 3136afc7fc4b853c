"""Checking an export before anything is written: every record, then the whole DAG.

An import is held to what ingest and compaction guarantee, since everything
read later (assembly, search, describe, expand, the console) relies on it:

- each line is a valid record (types, the columns' bounds, known values);
- a message's content is derived from its blocks exactly as ingest derives
  it (``prepare_message``: the same block validation, size limit and token
  estimate), so its plain text, parts and token count are never taken on
  trust; summaries' and files' token counts are recomputed the same way;
- seqs, client ids, summary ids, file ids and context ordinals are unique;
  every reference resolves inside the file (a message seq, a summary's
  sources, a context item's message or summary) or, for summaries the
  file does not hold, in the tenant (checked by the service);
- the DAG has the shape compaction keeps: leaves (depth 0) point at
  messages, condensed summaries at shallower summaries, and every message
  and summary of the file is reachable from the context exactly once.

A refusal names the line and the reason; nothing is written.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable
from dataclasses import dataclass, field

from pydantic import ValidationError

from lcm.content import IMAGE_TOKEN_ESTIMATE, IncomingMessage, prepare_message
from lcm.errors import InvalidInput, TooLarge
from lcm.storable import find_unstorable
from lcm.tokens import estimate_tokens
from lcm.transfer.records import (
    RECORD,
    ContextItemRecord,
    ConversationRecord,
    FileRecord,
    MessageRecord,
    PartRecord,
    Record,
    SummaryRecord,
)


@dataclass
class ParsedExport:
    """An export file, validated record by record and as a whole.

    The ``*_lines`` lists hold each record's line number, in step with the
    record lists. Messages, summaries and files carry recomputed derived
    fields (content, parts, token counts).
    """

    conversation: ConversationRecord
    messages: list[MessageRecord]
    files: list[FileRecord]
    summaries: list[SummaryRecord]
    context_items: list[ContextItemRecord]
    message_lines: list[int] = field(default_factory=list)
    file_lines: list[int] = field(default_factory=list)
    summary_lines: list[int] = field(default_factory=list)
    context_lines: list[int] = field(default_factory=list)

    def outside_summary_ids(self) -> set[str]:
        """Summaries named (by context items or as parents) that the file does not hold."""
        named = {i.summary_id for i in self.context_items if i.summary_id} | {
            p for s in self.summaries for p in s.parent_ids
        }
        return named - {s.id for s in self.summaries}


def parse_export(lines: Iterable[str], *, max_message_chars: int) -> ParsedExport:
    """Validate an export; ``InvalidInput`` (``TooLarge`` past a size limit) names the line."""
    header: ConversationRecord | None = None
    export: ParsedExport | None = None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        record = _record(line, number)
        if isinstance(record, ConversationRecord):
            if header is not None:
                raise InvalidInput(f"line {number}: a second conversation header")
            header = record
            export = ParsedExport(header, [], [], [], [])
        elif export is None:
            raise InvalidInput("the export must start with its conversation header")
        elif isinstance(record, MessageRecord):
            export.messages.append(_derived_message(record, number, max_message_chars))
            export.message_lines.append(number)
        elif isinstance(record, FileRecord):
            export.files.append(_checked_file(record, number))
            export.file_lines.append(number)
        elif isinstance(record, SummaryRecord):
            export.summaries.append(_checked_summary(record, number, max_message_chars))
            export.summary_lines.append(number)
        else:
            export.context_items.append(_checked_item(record, number))
            export.context_lines.append(number)
    if export is None:
        raise InvalidInput("the export is empty")
    check_references(export)
    return export


def _record(line: str, number: int) -> Record:
    try:
        raw = json.loads(line)
        problem = find_unstorable(raw, f"line {number}")
        if problem:
            raise InvalidInput(problem)
        return RECORD.validate_python(raw)
    except (ValueError, ValidationError, RecursionError) as exc:
        raise InvalidInput(f"line {number} is not an export record: {exc}") from exc


def _derived_message(record: MessageRecord, number: int, max_chars: int) -> MessageRecord:
    """The message as ingest would store it from the same blocks."""
    ordinals = [p.ordinal for p in record.parts]
    if len(set(ordinals)) != len(ordinals):
        raise InvalidInput(f"line {number}: message seq {record.seq} repeats a part ordinal")
    if record.content_shape == "text":
        content: str | list[object] = record.content
    else:
        content = [p.payload for p in sorted(record.parts, key=lambda p: p.ordinal)]
    incoming = IncomingMessage(
        record.role, content, record.client_id, provider=record.provider, model=record.model
    )
    prepared = prepare_message(incoming, f"line {number}", max_chars)
    return record.model_copy(
        update={
            "content": prepared.content,
            "token_count": prepared.token_count,
            "parts": [
                PartRecord(
                    ordinal=i,
                    part_type=p.part_type,
                    text=p.text,
                    tool_call_id=p.tool_call_id,
                    payload=p.payload,
                )
                for i, p in enumerate(prepared.parts)
            ],
        }
    )


def _checked_file(record: FileRecord, number: int) -> FileRecord:
    if record.encoding == "utf-8":
        tokens = estimate_tokens(record.content)
    else:
        try:
            base64.b64decode(record.content, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise InvalidInput(f"line {number}: file {record.id} is not valid base64") from exc
        tokens = IMAGE_TOKEN_ESTIMATE  # only images are stored as bytes (lcm.files.extraction)
    return record.model_copy(update={"token_count": tokens})


def _checked_summary(record: SummaryRecord, number: int, max_chars: int) -> SummaryRecord:
    where = f"line {number}: summary {record.id}"
    if len(record.content) > max_chars:
        raise TooLarge(f"{where} has {len(record.content)} characters; the limit is {max_chars}")
    if record.earliest_at > record.latest_at:
        raise InvalidInput(f"{where}: earliest_at is after latest_at")
    if record.kind == "leaf":
        if record.depth != 0 or not record.message_seqs or record.parent_ids:
            raise InvalidInput(f"{where}: a leaf has depth 0, source messages and no parents")
        if len(set(record.message_seqs)) != len(record.message_seqs):
            raise InvalidInput(f"{where} names a source message twice")
    else:
        if record.depth < 1 or not record.parent_ids or record.message_seqs:
            raise InvalidInput(
                f"{where}: a condensed summary has depth >= 1, parents and no messages"
            )
        if len(set(record.parent_ids)) != len(record.parent_ids):
            raise InvalidInput(f"{where} names a parent twice")
    return record.model_copy(update={"token_count": estimate_tokens(record.content)})


def _checked_item(record: ContextItemRecord, number: int) -> ContextItemRecord:
    if record.item_type == "message":
        ok = record.message_seq is not None and record.summary_id is None
    else:
        ok = record.summary_id is not None and record.message_seq is None
    if not ok:
        raise InvalidInput(
            f"line {number}: a {record.item_type} context item names exactly one "
            f"{'message_seq' if record.item_type == 'message' else 'summary_id'}"
        )
    return record


def _unique(values: Iterable[object], lines: list[int], what: str) -> None:
    first: dict[object, int] = {}
    for value, line in zip(values, lines, strict=True):
        if value is None:
            continue
        if value in first:
            raise InvalidInput(f"line {line}: {what} {value!r} repeats line {first[value]}")
        first[value] = line


def check_references(export: ParsedExport) -> None:
    """Uniqueness, references inside the file and the DAG's shape (see the module doc)."""
    _unique((m.seq for m in export.messages), export.message_lines, "message seq")
    _unique((m.client_id for m in export.messages), export.message_lines, "message client_id")
    _unique((f.id for f in export.files), export.file_lines, "file id")
    _unique((s.id for s in export.summaries), export.summary_lines, "summary id")
    _unique((i.ordinal for i in export.context_items), export.context_lines, "context ordinal")
    seqs = {m.seq for m in export.messages}
    depths = {s.id: s.depth for s in export.summaries}
    for f, line in zip(export.files, export.file_lines, strict=True):
        if f.message_seq is not None and f.message_seq not in seqs:
            raise InvalidInput(f"line {line}: file {f.id} names message seq {f.message_seq}")
    for s, line in zip(export.summaries, export.summary_lines, strict=True):
        for seq in s.message_seqs:
            if seq not in seqs:
                raise InvalidInput(f"line {line}: summary {s.id} names message seq {seq}")
        for parent in s.parent_ids:
            if parent in depths and depths[parent] >= s.depth:
                raise InvalidInput(
                    f"line {line}: summary {s.id} (depth {s.depth}) names parent {parent} "
                    f"of depth {depths[parent]}: parents are shallower"
                )
    for item, line in zip(export.context_items, export.context_lines, strict=True):
        if item.message_seq is not None and item.message_seq not in seqs:
            raise InvalidInput(f"line {line}: context item names message seq {item.message_seq}")
    _check_reachability(export)


def _check_reachability(export: ParsedExport) -> None:
    """Every message and summary of the file is reachable from the context exactly once."""
    by_id = {s.id: s for s in export.summaries}
    message_line = dict(zip((m.seq for m in export.messages), export.message_lines, strict=True))
    summary_line = dict(zip(by_id, export.summary_lines, strict=True))
    messages_seen: set[int] = set()
    summaries_seen: set[str] = set()
    stack: list[tuple[str | None, int | None]] = [
        (i.summary_id, i.message_seq) for i in export.context_items
    ]
    while stack:
        summary_id, seq = stack.pop()
        if seq is not None:
            if seq in messages_seen:
                raise InvalidInput(
                    f"line {message_line[seq]}: message seq {seq} is reachable twice "
                    "from the context (a leaf or the context names it twice)"
                )
            messages_seen.add(seq)
            continue
        summary = by_id.get(str(summary_id))
        if summary is None:  # the tenant's, outside the file (checked by the service)
            continue
        if summary.id in summaries_seen:
            raise InvalidInput(
                f"line {summary_line[summary.id]}: summary {summary.id} is reachable twice "
                "from the context"
            )
        summaries_seen.add(summary.id)
        stack.extend((None, s) for s in summary.message_seqs)
        stack.extend((p, None) for p in summary.parent_ids)
    for m, line in zip(export.messages, export.message_lines, strict=True):
        if m.seq not in messages_seen:
            raise InvalidInput(
                f"line {line}: message seq {m.seq} is not reachable from the context "
                "(no context item or summary names it)"
            )
    for s, line in zip(export.summaries, export.summary_lines, strict=True):
        if s.id not in summaries_seen:
            raise InvalidInput(f"line {line}: summary {s.id} is not reachable from the context")

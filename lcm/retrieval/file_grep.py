"""Grep over large files: the text kept outside the database, line by line.

Files have no database index (they live in file storage), so this is a scan
of the scope's files, bounded by the search time budget and the limit. The
matchers are the same safe ones as for messages: RE2 for regex mode, and for
full-text mode plain case-insensitive substrings (every OR-group must match
in the line, no excluded term may).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from sqlalchemy.orm import Session

from lcm.errors import InvalidInput
from lcm.files.repository import LargeFileRepository
from lcm.files.service import FileMatch, grep_files
from lcm.files.storage import FileStorage
from lcm.retrieval.grep import GrepLimits, GrepMatch, GrepQuery, GrepResult
from lcm.retrieval.query import TextQuery, compile_regex, parse_text_query
from lcm.retrieval.repository import HistoryRepository
from lcm.retrieval.search_rows import Bounds
from lcm.retrieval.snippets import build_snippet
from lcm.secrets import SecretSpan, file_spans, mask_ranges


def grep_large_files(
    session: Session, storage: FileStorage, bounds: Bounds, query: GrepQuery, limits: GrepLimits
) -> GrepResult:
    """Matching lines of the scope's large files, oldest file first."""
    matches, spans = _matchers(query, limits)
    deadline = time.monotonic() + limits.timeout_ms / 1000

    def out_of_time() -> bool:
        # No statement timeout covers a file scan: the search budget is checked as it reads.
        return time.monotonic() > deadline

    conversations = _conversations(session, bounds)
    found = [
        m
        for m in grep_files(
            session,
            storage,
            conversations,
            matches,
            limit=query.limit,
            out_of_time=out_of_time,
            file_ids=frozenset(query.file_ids),
        )
        if (bounds.since is None or m.created_at >= bounds.since)
        and (bounds.before is None or m.created_at < bounds.before)
    ]
    complete = time.monotonic() <= deadline
    secrets = {f: file_spans(session, bounds.tenant_id, f) for f in {m.file_id for m in found}}
    result = [
        GrepMatch(
            type="file",
            id=m.file_id,
            ref=m.file_id,
            conversation_id=m.conversation_id,
            seq=None,
            created_at=m.created_at,
            snippet=_snippet(m.text, spans(m.text), _on_line(secrets[m.file_id], m)),
            score=None,
            line=m.line,
        )
        for m in found
    ]
    notes = [] if complete else ["time budget reached: results cover the files scanned"]
    notes += _unknown_files(session, conversations, query.file_ids)
    return GrepResult(result, query.mode, query.sort, complete, None, notes)


def _on_line(spans: list[SecretSpan], match: FileMatch) -> list[SecretSpan]:
    """The file's spans that reach into the matched line, moved onto it (clipped to it)."""
    start, end = match.offset, match.offset + len(match.text)
    return [
        SecretSpan(
            None,
            max(s.offset, start) - start,
            min(s.end, end) - max(s.offset, start),
            s.kind,
            s.ordinal,
        )
        for s in spans
        if s.offset < end and s.end > start
    ]


def _snippet(line: str, matched: list[tuple[int, int]], secrets: list[SecretSpan]) -> str:
    """The line's snippet, cut from the line with its secrets masked."""
    if secrets:
        line, matched = mask_ranges(line, secrets, matched)
    return build_snippet(line, matched)


def _unknown_files(
    session: Session, conversations: list[int], file_ids: tuple[str, ...]
) -> list[str]:
    """A note naming the requested files the scope does not hold (none requested: none)."""
    if not file_ids:
        return []
    held = {row.id for row in LargeFileRepository(session).for_conversations(conversations)}
    unknown = [f for f in file_ids if f not in held]
    return [f"not in this scope: {', '.join(unknown)}"] if unknown else []


def _matchers(
    query: GrepQuery, limits: GrepLimits
) -> tuple[Callable[[str], bool], Callable[[str], list[tuple[int, int]]]]:
    if query.mode in ("semantic", "hybrid"):
        raise InvalidInput(
            f'"mode": "{query.mode}" searches messages and summaries; files take regex or full_text'
        )
    if query.mode == "regex":
        regex = compile_regex(query.pattern, limits.max_pattern_chars)

        def found(line: str) -> bool:
            return regex.compiled.search(line) is not None

        return found, regex.spans
    text_query = parse_text_query(query.pattern)
    return _text_matcher(text_query), _text_spans(text_query)


def _conversations(session: Session, bounds: Bounds) -> list[int]:
    if bounds.conversation_ids is not None:
        return list(bounds.conversation_ids)
    return HistoryRepository(session).tenant_conversation_ids(bounds.tenant_id, limit=None)


def _text_matcher(query: TextQuery) -> Callable[[str], bool]:
    groups = [[t.text.lower() for t in group] for group in query.groups]
    excluded = [t.text.lower() for t in query.excluded]

    def matches(line: str) -> bool:
        lowered = line.lower()
        return all(any(t in lowered for t in group) for group in groups) and not any(
            t in lowered for t in excluded
        )

    return matches


def _text_spans(query: TextQuery) -> Callable[[str], list[tuple[int, int]]]:
    terms = [t.text.lower() for t in query.positive_terms]

    def spans(line: str) -> list[tuple[int, int]]:
        lowered, out = line.lower(), []
        for term in terms:
            at = lowered.find(term)
            if at >= 0:
                out.append((at, at + len(term)))
        return sorted(out)

    return spans

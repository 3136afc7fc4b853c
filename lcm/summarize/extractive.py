"""The offline summary backend: extraction, no LLM, no network.

Used when no Anthropic key is configured (embedded mode, CI, air-gapped
installs). It cannot paraphrase, so it keeps the sentences most likely to
matter later (decisions, errors and fixes, open questions, anything naming a
file, URL, number or person), each with the timestamp of its line, then lists
the references it had no room for. Same input, same output: ties are broken
by position and nothing depends on hashing or time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lcm.summarize.entities import (
    TIMESTAMP_RE,
    find_names,
    find_numbers,
    find_paths,
    find_timestamps,
    find_urls,
)
from lcm.summarize.footer import FOOTER_PREFIX, derive_topics, footer_line
from lcm.summarize.provider import Completion, SummaryRequest
from lcm.summarize.truncation import clip_to_tokens
from lcm.tokens import estimate_tokens

EXTRACTIVE_MODEL = "extractive"

_DECISION_RE = re.compile(
    r"\b(decid\w*|decision|agreed|chose|choose|will|won't|must|should|need(?:s|ed)? to|"
    r"plan\w*|fix\w*|resolv\w*|solved|error\w*|fail\w*|exception|bug|broke\w*|crash\w*|"
    r"warning|todo|fixme|blocked|deadline|constraint|never|always|important|because|"
    r"instead|switch\w*|revert\w*|deploy\w*|conclu\w*)\b"
    r"|决定|必须|错误|修复|问题|決定|エラー|修正",
    re.IGNORECASE,
)
# Sentence ends: Latin punctuation followed by space, or CJK full-width . ! ?
_SENTENCE_END_RE = re.compile("(?<=[.!?])\\s+(?=\\S)|(?<=[\u3002\uff01\uff1f])")
_LINE_STAMP_WINDOW = 40
_MAX_SENTENCE_TOKENS = 60
# Aggressive mode keeps only sentences at least this strong (a decision, or a file
# or URL plus more); normal mode keeps anything with some signal.
_DURABLE_SCORE = 3
# Share of the budget the references line may use.
_REFERENCES_SHARE = 0.2
_MIN_BUDGET = 32


@dataclass(frozen=True, slots=True)
class _Sentence:
    position: int
    text: str
    score: int


def _line_stamp(line: str) -> str | None:
    """The timestamp the caller rendered at the start of a line, if any."""
    match = TIMESTAMP_RE.search(line[:_LINE_STAMP_WINDOW])
    return match.group(0) if match else None


def _score(sentence: str) -> int:
    score = 0
    if _DECISION_RE.search(sentence):
        score += 3
    if find_paths(sentence) or find_urls(sentence):
        score += 2
    if find_numbers(sentence):
        score += 1
    if find_names(sentence):
        score += 1
    if sentence.rstrip().endswith(("?", "\uff1f")):
        score += 1  # open questions are what a later turn most often needs
    return score


def _sentences(source_text: str) -> list[_Sentence]:
    """Candidate sentences, each carrying its line's timestamp; footers are skipped."""
    found: list[_Sentence] = []
    # Conversations repeat themselves (retries, re-pasted errors); keep the first telling.
    seen: set[str] = set()
    for line in source_text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(FOOTER_PREFIX):
            continue
        stamp = _line_stamp(stripped)
        for index, piece in enumerate(_SENTENCE_END_RE.split(stripped)):
            piece = piece.strip()
            key = TIMESTAMP_RE.sub("", piece).strip().lower()
            if not key or key in seen:
                continue
            seen.add(key)
            if index > 0 and stamp:
                piece = f"[{stamp}] {piece}"
            clipped = clip_to_tokens(piece, _MAX_SENTENCE_TOKENS)
            if clipped != piece:
                clipped += " …"
            found.append(_Sentence(len(found), clipped, _score(piece)))
    return found


def _select(sentences: list[_Sentence], budget: int, aggressive: bool) -> list[_Sentence]:
    """The best-scoring sentences that fit ``budget``, returned in source order."""
    if not sentences:
        return []
    threshold = _DURABLE_SCORE if aggressive else 1
    if not any(s.score >= threshold for s in sentences):
        threshold = 0  # plain prose with no signal at all: rank by position alone
    # The first and last sentences frame the span; give them a small edge.
    edges = {sentences[0].position, sentences[-1].position}
    ranked = sorted(
        (s for s in sentences if s.score >= threshold),
        key=lambda s: (-(s.score + (1 if s.position in edges else 0)), s.position),
    )
    chosen: list[_Sentence] = []
    used = 0
    for sentence in ranked:
        cost = estimate_tokens(sentence.text) + 1  # + the bullet and newline
        if used + cost <= budget:
            chosen.append(sentence)
            used += cost
    return sorted(chosen, key=lambda s: s.position)


def _references(source_text: str, body: str, budget: int) -> str:
    """A line listing paths, URLs, names and numbers the body left out, within ``budget``."""
    groups = (
        ("files", find_paths(source_text)),
        ("links", find_urls(source_text)),
        ("names", find_names(source_text)),
        ("numbers", find_numbers(source_text)),
    )
    line = ""
    for label, items in groups:
        for item in items:
            if item in body or item in line:
                continue
            if f"{label}: " in line:
                candidate = f"{line}, {item}"
            else:
                candidate = f"{line}; {label}: {item}" if line else f"References: {label}: {item}"
            if estimate_tokens(candidate) > budget:
                return line
            line = candidate
    return line


class ExtractiveProvider:
    """A :class:`~lcm.summarize.provider.SummaryProvider` that extracts instead of writing.

    ``previous_context`` and custom instructions are ignored: extraction has no
    use for continuity and cannot follow free-text instructions. Usage is
    reported as token estimates so the caller's accounting stays uniform.
    """

    def complete(self, request: SummaryRequest) -> Completion:
        source = request.source_text
        input_tokens = estimate_tokens(source)
        # Never spend more than half the input: an extract as long as its source
        # saves nothing, and escalation would have to throw it away.
        budget = max(_MIN_BUDGET, min(request.target_tokens, input_tokens // 2))
        footer = footer_line(derive_topics(source), max_tokens=max(8, budget // 5))
        header = _header(source)
        room = budget - estimate_tokens(footer) - estimate_tokens(header) - 2
        references_room = int(room * _REFERENCES_SHARE)
        chosen = _select(_sentences(source), room - references_room, request.aggressive)
        body = "\n".join(f"- {s.text}" for s in chosen)
        references = _references(source, body, references_room)
        parts = [header, body, references, footer]
        text = "\n".join(part for part in parts if part)
        return Completion(
            text=text,
            model=EXTRACTIVE_MODEL,
            input_tokens=input_tokens,
            output_tokens=estimate_tokens(text),
            provider="offline",
        )


def _header(source_text: str) -> str:
    """A one-line frame: how much was extracted from and the time span it covers."""
    lines = sum(1 for line in source_text.splitlines() if line.strip())
    stamps = find_timestamps(source_text)
    if not stamps:
        return f"Extract of {lines} lines (offline summarizer):"
    span = stamps[0] if len(stamps) == 1 else f"{stamps[0]} to {stamps[-1]}"
    return f"Extract of {lines} lines, {span} (offline summarizer):"

"""Does the recall set keep its own rule? ``python -m bench recall --audit``.

A ``paraphrase`` question (``bench/recall_set.py``) must not reuse the words
of the messages that answer it: for each one, this lists the content words
it shares with the text of its answer lines in ``../shared/data``, compared
the way a full-text engine compares them: split into letter and digit runs,
lower-cased, English function words and the question's frame dropped
(``STOP_WORDS``), then stemmed with the Snowball English stemmer (what
Postgres' ``english`` text search configuration applies; SQLite's
``unicode61`` does not stem, so a stem match is the stricter test).

The rule (docs/performance.md, "Recall"): a paraphrase question shares no
content stem with its answers except the few in ``ALLOWED``, words a user
cannot avoid when asking about a coding session ("test", "file", "error"),
and stems common in the question's session: found in at least
``COMMON_SHARE`` of its messages, they do not point at the answer (a word in
one message of twenty ranks low in BM25 and is one a user reaches for anyway).
``identifier`` questions are exempt: they reuse a name on purpose.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import snowballstemmer

from bench.recall_set import SET_PATH, STOP_WORDS, RecallQuestion, load
from bench.transcripts import DATA

# English function words beyond the question frame the keyword form drops: a
# search engine's stop list (Postgres' ``english`` drops these too).
FUNCTION_WORDS = frozenset(
    """
    above against below between down further few many much must myself nothing
    ourselves shall something theirs themselves thing things yourself yourselves
    anything everything whether within without upon via per cannot
    """.split()  # noqa: SIM905 - a word list reads better as text
)
# Stems a question may share with its answers: words a user cannot avoid when
# asking about a coding session. Kept short on purpose; each is a stem.
ALLOWED = frozenset(
    """
    test file error code
    """.split()  # noqa: SIM905 - a word list reads better as text
)
COMMON_SHARE = 0.05
# Keys of a transcript line that hold no searchable text (ids, signatures, media).
_NOT_TEXT = frozenset(
    {"type", "id", "tool_use_id", "toolCallId", "signature", "thinkingSignature", "data"}
)
_RUN = re.compile(r"[^\W_]+")  # letter / digit runs: how unicode61 splits words


@dataclass(frozen=True, slots=True)
class Finding:
    question: RecallQuestion
    shared: dict[str, list[str]]  # stem -> the question's words with that stem
    common: frozenset[str]  # of the shared stems, those common in the session

    @property
    def forbidden(self) -> list[str]:
        """The shared stems the rule refuses: neither ``ALLOWED`` nor common in the session."""
        return sorted(s for s in self.shared if s not in ALLOWED and s not in self.common)


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    return snowballstemmer.stemmer("english")


@lru_cache(maxsize=200_000)  # a session repeats its words; stemming each once is the audit's cost
def _stem(word: str) -> str:
    return str(_stemmer().stemWord(word))


@lru_cache(maxsize=16)
def _lines(path: Path) -> tuple[str, ...]:
    return tuple(path.read_text(encoding="utf-8").splitlines())


def content_stems(text: str) -> dict[str, list[str]]:
    """Each content stem of ``text`` -> the words (lower-cased, in order) that gave it."""
    words: dict[str, list[str]] = {}
    for word in _RUN.findall(text.lower()):
        if word in STOP_WORDS or word in FUNCTION_WORDS or word.isdigit() or len(word) < 2:
            continue
        stem = _stem(word)
        if word not in words.setdefault(stem, []):
            words[stem].append(word)
    return words


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in _NOT_TEXT:
                yield from _strings(item)


def line_text(entry: dict[str, Any]) -> str:
    """The text a transcript line gives its message: every string of its content (prose,
    reasoning, a tool call's name and input, a tool's output), ids and signatures left out."""
    message = entry.get("message")
    if isinstance(message, dict):
        return "\n".join(_strings(message.get("content")))
    return "\n".join(_strings({k: v for k, v in entry.items() if k not in ("timestamp",)}))


def answer_text(path: Path, groups: Sequence[Sequence[int]]) -> str:
    """The text of every answer line of ``path`` (1-based line numbers)."""
    lines = _lines(path)
    wanted = sorted({n for group in groups for n in group})
    return "\n".join(line_text(json.loads(lines[n - 1])) for n in wanted if n <= len(lines))


def session_shares(path: Path) -> dict[str, float]:
    """Each content stem of a session -> the share of its messages (lines that carry a
    ``message``) whose text holds it."""
    found: Counter[str] = Counter()
    messages = 0
    for line in _lines(path):
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("message"), dict):
            messages += 1
            found.update(content_stems(line_text(entry)).keys())
    return {stem: n / messages for stem, n in found.items()}


def audit(questions: Sequence[RecallQuestion], data: Path) -> list[Finding]:
    """Per paraphrase question, the content stems it shares with its answers' text."""
    findings, shares = [], {}
    for q in questions:
        if q.style != "paraphrase":
            continue
        if q.source not in shares:
            shares[q.source] = session_shares(data / q.source)
        answers = content_stems(answer_text(data / q.source, q.answers))
        shared = {s: w for s, w in content_stems(q.question).items() if s in answers}
        common = frozenset(s for s in shared if shares[q.source].get(s, 0.0) >= COMMON_SHARE)
        findings.append(Finding(q, shared, common))
    return findings


def counts(findings: Sequence[Finding], allowed: bool = True) -> Counter[str]:
    """How many questions share 0, 1, 2, 3+ stems (``allowed``: any, else the forbidden)."""
    buckets: Counter[str] = Counter()
    for f in findings:
        n = len(f.shared) if allowed else len(f.forbidden)
        buckets["3+" if n >= 3 else str(n)] += 1
    return buckets


def report(findings: Sequence[Finding]) -> None:
    for label, allowed in (("any stem", True), ("breaking the rule", False)):
        c = counts(findings, allowed)
        cells = ", ".join(f"{b}: {c[b]}" for b in ("0", "1", "2", "3+"))
        print(f"  {len(findings)} paraphrase questions sharing ({label}) {cells}", flush=True)
    words: Counter[str] = Counter()
    for f in findings:
        if f.forbidden:
            shared = "; ".join(f"{s} ({'/'.join(f.shared[s])})" for s in f.forbidden)
            print(f"    {f.question.id}: {shared}", flush=True)
            words.update(f.forbidden)
    common = ", ".join(f"{w} {n}" for w, n in words.most_common(30))
    print(f"  most shared stems: {common or '-'}", flush=True)


def report_compliant(
    scores: Mapping[str, Sequence[tuple[RecallQuestion, float, float]]], data: Path = DATA
) -> None:
    """recall@10 (MRR) per ranking on the paraphrase questions that keep the rule, and on
    those sharing no content stem at all: figures no rewriting can have flattered."""
    rows = next(iter(scores.values()), [])
    findings = {f.question.id: f for f in audit([q for q, _, _ in rows], data)}
    subsets = {
        "keeping the rule": {i for i, f in findings.items() if not f.forbidden},
        "sharing no stem": {i for i, f in findings.items() if not f.shared},
    }
    for name, kept in subsets.items():
        print(f"  paraphrase questions {name}: n={len(kept)}", flush=True)
        for label, scored in scores.items():
            pairs = [(r, m) for q, r, m in scored if q.id in kept]
            if pairs:
                recall = sum(r for r, _ in pairs) / len(pairs)
                mrr = sum(m for _, m in pairs) / len(pairs)
                print(f"    {label:36}{recall:.3f} ({mrr:.3f})", flush=True)


def run(args: argparse.Namespace, data: Path) -> None:
    for path in [Path(p) for p in args.set or [SET_PATH]]:
        print(f"  {path.name}:", flush=True)
        report(audit(load(path), data))

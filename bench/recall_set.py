"""The paraphrase recall set (``bench/recall_set.jsonl``) and how an answer list is scored.

Each record is a question a user would ask about an earlier turn of one real
session under ``../shared/data`` (``source``, relative to that folder),
written by hand without the source's distinctive words (``style``
``paraphrase``), or a short query that does reuse an identifier from the
source (``style`` ``identifier``), reported apart. ``answers`` is a list of
groups of 1-based line numbers of the source file: every group is one piece
of the answer (a multi-hop question has several), and any line of a group
answers that piece. A line names one transcript entry, so the harness can
map it to the message lcm stored for it (the entry's own id, see
:func:`bench.recall_import.line_client_ids`).

Scoring, per question, over the ranked message list a search returned:
recall@k is the share of groups with a line among the first k results; the
reciprocal rank is 1 / the rank of the first result that answers any group
(0 when none does). Figures are means over questions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

SET_PATH = Path(__file__).resolve().parent / "recall_set.jsonl"
KINDS = ("fact", "decision", "location", "error", "multi-hop")
STYLES = ("paraphrase", "identifier")

# Words a search box gains nothing from: English function words and the
# conversational frame of a question about an earlier turn ("what did we…").
STOP_WORDS = frozenset(
    """
    a about after again all also am an and any are as at be because been before being
    both but by can could did do does doing done during each else end even ever for
    from get got had has have having he her here hers him his how i if in into is it
    its itself just let me more most my no nor not now of off on once one only or other
    our ours out over own same she should so some such than that the their them then
    there these they this those through to too under until up us very was way we were
    what when where which while who whom why will with would you your yours
    ask asked tell told say said first time earlier back again end ended up actually
    """.split()  # noqa: SIM905 - a word list reads better as text
)
_WORD = re.compile(r"[\w][\w.\-/]*[\w]|[\w]")


@dataclass(frozen=True, slots=True)
class RecallQuestion:
    id: str
    source: str  # path relative to ../shared/data
    kind: str
    style: str
    question: str
    answers: tuple[tuple[int, ...], ...]  # groups of 1-based source line numbers


def load(path: Path = SET_PATH) -> list[RecallQuestion]:
    """The set's records, checked: a malformed record raises ``ValueError`` naming it."""
    questions = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        questions.append(_record(json.loads(line), f"{path.name}:{number}"))
    ids = [q.id for q in questions]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path.name}: duplicate ids")
    return questions


def _record(value: dict[str, object], where: str) -> RecallQuestion:
    fields = {"id", "source", "kind", "style", "question", "answers"}
    if set(value) != fields:
        raise ValueError(f"{where}: fields {sorted(value)}, expected {sorted(fields)}")
    kind, style, question = value["kind"], value["style"], value["question"]
    if kind not in KINDS or style not in STYLES:
        raise ValueError(f"{where}: unknown kind {kind!r} or style {style!r}")
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"{where}: empty question")
    answers = value["answers"]
    if not (
        isinstance(answers, list)
        and answers
        and all(isinstance(g, list) and g for g in answers)
        and all(
            isinstance(n, int) and not isinstance(n, bool) and n > 0 for g in answers for n in g
        )
    ):
        raise ValueError(f"{where}: answers must be non-empty groups of positive line numbers")
    if kind == "multi-hop" and len(answers) < 2:
        raise ValueError(f"{where}: a multi-hop question needs two answer groups or more")
    return RecallQuestion(
        str(value["id"]),
        str(value["source"]),
        kind,
        style,
        question,
        tuple(tuple(g) for g in answers),
    )


def keywords(question: str) -> list[str]:
    """The question's words minus stop words, in order, once each (a mechanical keyword form)."""
    seen: list[str] = []
    for word in _WORD.findall(question.lower()):
        if word not in STOP_WORDS and not word.isdigit() and word not in seen:
            seen.append(word)
    return seen


def recall_at(ranked: Sequence[Hashable], groups: Iterable[Iterable[Hashable]], k: int) -> float:
    """The share of answer groups with a member among the first ``k`` of ``ranked``."""
    top = set(ranked[:k])
    sets = [set(g) for g in groups]
    if not sets:
        raise ValueError("a question needs at least one answer group")
    return sum(1 for g in sets if g & top) / len(sets)


def reciprocal_rank(ranked: Sequence[Hashable], groups: Iterable[Iterable[Hashable]]) -> float:
    """1 / the 1-based rank of the first result answering any group; 0 when none does."""
    wanted = set().union(*(set(g) for g in groups))
    for rank, item in enumerate(ranked, 1):
        if item in wanted:
            return 1.0 / rank
    return 0.0

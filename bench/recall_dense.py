"""Dense and hybrid ranking for ``bench recall``, computed in the harness (an approximation).

Used when the server has no ``semantic``/``hybrid`` grep mode to ask: the
prose of every imported user and assistant message (its text parts, read
back from the export) is embedded here with the project's embedder
(``lcm.semantic.load_embedder``, the ``semantic`` extra) as ``"role: text"``,
its first :data:`WINDOW` characters. Tool calls and tool output are not
embedded (on a shared 2-core machine the model reads ~3 texts/s under load),
so dense finds them only through fusion with full text.

Query handling, for the dense query only (full text always gets its keywords):

- ``raw``: the question as typed;
- ``strip_roles``: without the words naming the two speakers (I, you, we, …),
  which otherwise pull the vector towards turns addressed to someone;
- ``strip_frequent``: without words found in more than :data:`FREQUENT` of the
  session's messages (a name list's stand-in);
- ``both``.

Hybrid is reciprocal-rank fusion (k = :data:`RRF_K`) of the full-text
ranking (keywords ORed, top :data:`DEPTH`) and the dense ranking (top
:data:`DEPTH`). ``naive`` fuses the raw question's dense ranking with the
question-as-typed full text, the textbook setup.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.recall_set import RecallQuestion

Position = tuple[int, int]
Ranker = Callable[[RecallQuestion], list[Position]]

WINDOW = 600  # characters, ~150 word pieces: the opening of a message says what it is about
FREQUENT = 0.10
RRF_K = 60
DEPTH = 50
HANDLINGS = ("raw", "strip_roles", "strip_frequent", "both")
ROLE_WORDS = frozenset(
    "i me my mine we us our ours you your yours user assistant agent model claude".split()  # noqa: SIM905
)
_WORD = re.compile(r"[\w][\w'.\-/]*[\w]|[\w]")


class DenseIndex:
    """Every message of the imported sessions as window vectors, searched per conversation."""

    def __init__(self, embedder: Any, messages: dict[Position, tuple[str, str]]) -> None:
        self._embedder = embedder
        self._np = _numpy()
        self._owners = list(messages)
        self.pool = frozenset(messages)  # what dense can return
        texts = [f"{role}: {content[:WINDOW]}" for role, content in messages.values()]
        self._vectors = _cached_embed(embedder, texts)
        self._words = _document_frequency(messages)

    def rank(self, conversation_id: int, query: str, depth: int = DEPTH) -> list[Position]:
        np = self._np
        if not query.strip():
            return []
        q = self._embedder.embed([query])[0]
        scores = self._vectors @ q
        best: dict[Position, float] = {}
        for index in np.argsort(-scores):
            owner = self._owners[index]
            if owner[0] == conversation_id and owner not in best:
                best[owner] = float(scores[index])
                if len(best) == depth:
                    break
        return list(best)

    def handle(self, conversation_id: int, question: str, handling: str) -> str:
        """The dense query for ``question`` under one query handling."""
        words = _WORD.findall(question)
        if handling in ("strip_roles", "both"):
            words = [w for w in words if w.lower() not in ROLE_WORDS]
        if handling in ("strip_frequent", "both"):
            frequent = self._words.get(conversation_id, {})
            words = [w for w in words if frequent.get(w.lower(), 0.0) <= FREQUENT]
        return " ".join(words)


def _numpy() -> Any:
    import numpy

    return numpy


def _document_frequency(messages: dict[Position, tuple[str, str]]) -> dict[int, dict[str, float]]:
    """Per conversation: each word's share of the messages holding it."""
    counts: dict[int, Counter[str]] = {}
    totals: Counter[int] = Counter()
    for (conversation_id, _), (_, content) in messages.items():
        totals[conversation_id] += 1
        words = {w.lower() for w in _WORD.findall(content)}
        counts.setdefault(conversation_id, Counter()).update(words)
    return {
        cid: {w: n / totals[cid] for w, n in counter.items()} for cid, counter in counts.items()
    }


def _cached_embed(embedder: Any, texts: Sequence[str]) -> Any:
    """``embedder.embed(texts)``; with ``LCM_BENCH_RECALL_CACHE`` set, kept there between runs."""
    np = _numpy()
    folder = os.environ.get("LCM_BENCH_RECALL_CACHE")
    if not folder:
        return _embed_by_length(embedder, texts)
    digest = hashlib.sha256(
        json.dumps([embedder.model_name, list(texts)]).encode("utf-8")
    ).hexdigest()[:24]
    path = Path(folder) / f"recall-{digest}.npy"
    if path.exists():
        return np.load(path)
    vectors = _embed_by_length(embedder, texts)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors


def _embed_by_length(embedder: Any, texts: Sequence[str]) -> Any:
    """Embed in order of length (a batch pads to its longest text), rows back in input order."""
    np = _numpy()
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    vectors = embedder.embed([texts[i] for i in order])
    out = np.empty_like(vectors)
    out[np.array(order, dtype=np.int64)] = vectors
    return out


def fuse(*rankings: Sequence[Position], k: int = RRF_K) -> list[Position]:
    """Reciprocal-rank fusion: each list adds 1 / (k + rank) to its items."""
    score: dict[Position, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, 1):
            score[item] = score.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(score, key=lambda item: -score[item])


def dense_rankers(
    index: DenseIndex,
    conversation_of: dict[str, int],
    full_text: Callable[[RecallQuestion, str], list[Position]],
    k: int,
) -> dict[str, Ranker]:
    """Dense and hybrid per query handling, the naive hybrid, and full text kept to
    dense's pool (the prose messages), so the two are also compared on equal candidates.

    ``full_text(question, form)`` is grep's ranking (top ``DEPTH``) for one
    query form, ``"question"`` or ``"keywords OR"``.
    """
    rankers: dict[str, Ranker] = {}

    def dense(q: RecallQuestion, handling: str) -> list[Position]:
        cid = conversation_of[q.source]
        return index.rank(cid, index.handle(cid, q.question, handling))

    def dense_only(handling: str) -> Ranker:
        return lambda q: dense(q, handling)[:k]

    def hybrid(form: str, handling: str) -> Ranker:
        return lambda q: fuse(full_text(q, form), dense(q, handling))[:k]

    # Full text on dense's pool: the ranking functions compared on equal candidates.
    rankers["full text: keywords OR, prose only"] = lambda q: [
        p for p in full_text(q, "keywords OR") if p in index.pool
    ][:k]
    for handling in HANDLINGS:
        rankers[f"dense: {handling}"] = dense_only(handling)
        rankers[f"hybrid: {handling}"] = hybrid("keywords OR", handling)
    rankers["hybrid naive (question + raw)"] = hybrid("question", "raw")
    return rankers

"""The prompt of an assemble call, put to work: relevance for eviction, recalled snippets.

Built per call by :func:`prompt_cue_for` and handed to :func:`lcm.assembly.assemble`
(which defines the :class:`lcm.assembly.PromptCue` it fills). Both readings
reuse grep's machinery rather than a ranking of their own:

* **Relevance** (``prompt_aware_eviction``): the prompt's words as a
  full-text query, ranked by grep's relevance (``sort: relevance``) over the
  conversation's messages and summaries that are context items now.
* **Recall** (``prompt_recall_max_snippets``): each identifier the prompt
  names and the assembled window does not show is looked for, newest first,
  in the conversation's raw user and assistant messages with grep's regex
  search (its trigram prefilter, RE2); the sentence naming it is kept.

  Where semantic recall is on (and the tenant's ``prompt_recall_semantic``),
  the conversation's older messages nearest the prompt in meaning, at or
  above ``semantic_min_similarity``, are recalled too
  (:mod:`lcm.retrieval.prompt_meaning`); the two lists are fused by
  reciprocal rank (k = 60, as hybrid grep), a message both find first, an
  exact identifier's snippet kept for it.

A call with no prompt, or a prompt giving neither anything to rank by nor
anything to recall, gets no cue: no query is added to the assembly. Every
search runs under grep's statement deadline, in a savepoint: one that runs
out is given up (no relevance, no snippet), never the assembly.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass

from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from lcm.assembly import AssembledContext, PromptCue, RecalledSnippet
from lcm.context import ContextEntry
from lcm.db.models import utcnow
from lcm.retrieval.expansion import grep_limits
from lcm.retrieval.grep import MAX_LIMIT, GrepLimits
from lcm.retrieval.prompt_meaning import MeaningAsk, recall_by_meaning
from lcm.retrieval.prompt_terms import (
    identifier_pattern,
    names,
    recall_identifiers,
    recall_sentence,
    relevance_query,
)
from lcm.retrieval.query import TextQuery, compile_regex
from lcm.retrieval.search_repository import SearchRepository, is_timeout
from lcm.retrieval.search_rows import Bounds
from lcm.retrieval.semantic_grep import RRF_K
from lcm.settings import Settings

log = logging.getLogger(__name__)

# Candidate messages read per identifier before giving up on it.
_RECALL_CANDIDATES = 32
_RECALL_ROLES = frozenset({"user", "assistant"})


def prompt_cue_for(
    session: Session, tenant_id: str, conversation_id: int, prompt: str | None, settings: Settings
) -> PromptCue | None:
    """What ``prompt`` tells the assembly of the conversation, or None when nothing."""
    query = relevance_query(prompt) if settings.prompt_aware_eviction else None
    max_snippets = settings.prompt_recall_max_snippets
    identifiers = recall_identifiers(prompt) if max_snippets else []
    meaning = None
    by_meaning = max_snippets and settings.semantic and settings.prompt_recall_semantic
    if by_meaning and prompt is not None and prompt.strip():
        meaning = MeaningAsk(
            prompt,
            settings.semantic_query_handling,
            settings.semantic_min_similarity,
            settings.statement_timeout_ms,
        )
    if query is None and not identifiers and meaning is None:
        return None
    return _Cue(
        SearchRepository(session),
        Bounds(tenant_id, (conversation_id,)),
        grep_limits(settings),
        query,
        identifiers,
        max_snippets,
        meaning,
    )


@dataclass
class _Cue:
    repo: SearchRepository
    bounds: Bounds
    limits: GrepLimits
    query: TextQuery | None
    identifiers: list[str]
    max_snippets: int
    meaning: MeaningAsk | None = None

    @property
    def ranks(self) -> bool:
        return self.query is not None

    def relevance(self, entries: Sequence[ContextEntry]) -> Mapping[int, float]:
        """Ordinal to grep's full-text relevance, for the entries the prompt's words match."""
        if self.query is None:
            return {}
        ordinals = {_row_key(e): e.ordinal for e in entries}
        bounds = Bounds(self.bounds.tenant_id, self.bounds.conversation_ids, in_context=True)
        half_life = self.limits.half_life_hours * 3600
        scores: dict[int, float] = {}
        with self._deadline("relevance"):
            for target in ("message", "summary"):
                rows = self.repo.full_text(
                    target, bounds, self.query, "relevance", MAX_LIMIT, utcnow(), half_life
                )
                for row in rows:
                    ordinal = ordinals.get((target, row.id))
                    if ordinal is not None and row.score:
                        scores[ordinal] = row.score
        return scores

    def recall(self, assembled: AssembledContext) -> Sequence[RecalledSnippet]:
        """Sentences of older messages naming what the prompt names (or near it in
        meaning) that the window lacks."""
        if (not self.identifiers and self.meaning is None) or assembled.fresh_tail_overflow:
            return ()
        shown = json.dumps(assembled.messages, ensure_ascii=False)
        by_name = self._recall_names(shown)
        if self.meaning is None:
            return by_name
        by_meaning: list[RecalledSnippet] = []
        with self._deadline("meaning"):
            by_meaning = (
                recall_by_meaning(self.repo, self.bounds, self.meaning, shown, self.max_snippets)
                or []
            )
        return fuse_snippets(by_name, by_meaning, self.max_snippets)

    def _recall_names(self, shown: str) -> list[RecalledSnippet]:
        missing = [name for name in self.identifiers if not names(shown, name)]
        if not missing:
            return []
        each = max(1, self.max_snippets // len(missing))
        found: list[RecalledSnippet] = []
        with self._deadline("recall"):
            for name in missing:
                found += self._recall_one(name, min(each, self.max_snippets - len(found)))
                if len(found) >= self.max_snippets:
                    break
        return found

    def _recall_one(self, name: str, wanted: int) -> list[RecalledSnippet]:
        regex = compile_regex(identifier_pattern(name), self.limits.max_pattern_chars)
        found: list[RecalledSnippet] = []
        candidates = self.repo.stream_candidates("message", self.bounds, regex.literals)
        with closing(candidates):  # ends the server-side cursor when left early
            for read, row in enumerate(candidates):
                if read >= _RECALL_CANDIDATES or len(found) >= wanted:
                    break
                if row.role not in _RECALL_ROLES or row.seq is None:
                    continue
                sentence = recall_sentence(row.content, name)
                if sentence is not None and all(s.text != sentence for s in found):
                    found.append(RecalledSnippet(int(row.id), row.seq, row.role, name, sentence))
        return found

    @contextmanager
    def _deadline(self, what: str) -> Iterator[None]:
        """Grep's statement deadline, in a savepoint a timeout rolls back (then given up)."""
        savepoint = self.repo.session.begin_nested()
        try:
            with self.repo.statement_deadline(self.limits.timeout_ms):
                yield
        except OperationalError as exc:
            if not is_timeout(exc):
                raise
            savepoint.rollback()
            log.warning("assembly's prompt %s search ran out of time; assembled without it", what)
            return
        savepoint.commit()


def fuse_snippets(
    by_name: Sequence[RecalledSnippet], by_meaning: Sequence[RecalledSnippet], limit: int
) -> list[RecalledSnippet]:
    """The two lists fused by reciprocal rank, at most ``limit``, best first.

    A message the meaning side finds that an identifier found too adds its
    rank to that identifier's snippet (the exact sentence) rather than show
    the message twice; on a tie the identifier's snippet comes first.
    """
    items = list(by_name)
    scores = [1.0 / (RRF_K + rank) for rank in range(1, len(items) + 1)]
    first: dict[int, int] = {}
    for index, snippet in enumerate(items):
        first.setdefault(snippet.message_id, index)
    for rank, snippet in enumerate(by_meaning, 1):
        held = first.get(snippet.message_id)
        if held is None:
            first[snippet.message_id] = len(items)
            items.append(snippet)
            scores.append(1.0 / (RRF_K + rank))
        else:
            scores[held] += 1.0 / (RRF_K + rank)
    order = sorted(range(len(items)), key=lambda i: (-scores[i], i))
    return [items[i] for i in order[:limit]]


def _row_key(entry: ContextEntry) -> tuple[str, int | str]:
    """The search row an entry is: (target, id)."""
    if entry.message is not None:
        return "message", entry.message.id
    assert entry.summary is not None  # ContextEntry holds one of the two
    return "summary", entry.summary.id

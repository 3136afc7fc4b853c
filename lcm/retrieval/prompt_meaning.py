"""The recall cue's side by meaning: older messages near the prompt, above a floor.

Where the deployment has semantic recall on (``LCM_SEMANTIC``) and the
tenant's ``prompt_recall_semantic`` allows it, an assemble ``prompt`` also
recalls by meaning (:mod:`lcm.retrieval.prompt_cue` fuses this side with the
identifier lookups):

* The prompt, with the tenant's ``semantic_query_handling`` applied, is
  embedded once: a per-process LRU keeps recent prompts' vectors
  (:data:`lcm.semantic.query_vectors.PROMPT_VECTORS`), since a gateway
  assembles one prompt more than once a turn.
* Its nearest raw user and assistant messages of the conversation (the
  vectors grep's ``semantic`` mode reads) at or above the tenant's
  ``semantic_min_similarity`` are candidates; a sentence of each is shown
  unless the assembled window already shows it. Summaries are not searched:
  one outside the window is condensed into one inside it, and what the
  window lacks is the detail a summary drops, which raw messages keep.
* Hot path bounds: nothing waits for the model to load (a call before it is
  loaded goes without, and starts the load in the background), nor for more
  than :data:`MODEL_WAIT_SECONDS` while an embed job holds the model; the
  search runs under grep's statement deadline in a savepoint, and a deadline
  passed while embedding skips it. Given up, the assembly goes on without.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass

from lcm.assembly import RecalledSnippet
from lcm.retrieval.prompt_terms import meaning_sentence
from lcm.retrieval.search_repository import SearchRepository
from lcm.retrieval.search_rows import Bounds
from lcm.semantic import PROMPT_VECTORS, DenseQuery, dense_text, embedder_if_loaded, search_vector
from lcm.semantic_settings import QueryHandling

log = logging.getLogger(__name__)

# The most a prompt's embedding waits for the model while another run holds
# it (an embed job's batch of 32 texts holds it ~0.2-0.5 s on 2 cores).
MODEL_WAIT_SECONDS = 0.05
# Nearest messages read: hits the window shows and tool turns are skipped.
CANDIDATES = 32
_ROLES = frozenset({"user", "assistant"})


@dataclass(frozen=True, slots=True)
class MeaningAsk:
    """What the cue's side by meaning looks for, and how."""

    prompt: str
    handling: QueryHandling
    min_similarity: float
    timeout_ms: int


def recall_by_meaning(
    repo: SearchRepository, bounds: Bounds, ask: MeaningAsk, shown: str, wanted: int
) -> list[RecalledSnippet] | None:
    """Up to ``wanted`` snippets nearest the prompt that ``shown`` lacks, best first.

    None when the side was skipped (the model not loaded or busy, the
    deadline passed while embedding); the caller runs this in its deadline.
    """
    embedder = embedder_if_loaded()
    if embedder is None:
        log.info("assembly's prompt recall by meaning skipped: the embedder is still loading")
        return None
    deadline = time.monotonic() + ask.timeout_ms / 1000
    query = DenseQuery(
        bounds.tenant_id,
        bounds.conversation_ids,
        ("message",),
        None,
        None,
        ask.prompt,
        ask.handling,
        CANDIDATES,
    )
    text = dense_text(repo.session, query)
    vector = PROMPT_VECTORS.vector(embedder, text, MODEL_WAIT_SECONDS)
    if vector is None:
        log.info("assembly's prompt recall by meaning skipped: the model was busy")
        return None
    if time.monotonic() > deadline:
        log.warning("assembly's prompt meaning search ran out of time; assembled without it")
        return None
    found = search_vector(repo.session, embedder.model_name, vector, query, deadline, text)
    similar = {int(h.source[4:]): h.similarity for h in found.hits}
    similar = {i: s for i, s in similar.items() if s >= ask.min_similarity}
    rows = repo.rows_by_ids("message", bounds, list(similar))
    rows.sort(key=lambda r: (-similar[int(r.id)], int(r.id)))
    snippets: list[RecalledSnippet] = []
    for row in rows:
        if row.role not in _ROLES or row.seq is None:
            continue
        sentence = meaning_sentence(row.content, ask.prompt)
        if sentence is None or _json_text(sentence) in shown:
            continue
        score = round(similar[int(row.id)], 3)
        snippets.append(RecalledSnippet(int(row.id), row.seq, row.role, "", sentence, score))
        if len(snippets) == wanted:
            break
    return snippets


def _json_text(text: str) -> str:
    """``text`` as it reads inside the window's JSON (a string's escapes, no quotes)."""
    return json.dumps(text, ensure_ascii=False)[1:-1]

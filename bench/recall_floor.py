"""The similarity floor of recall by meaning, measured: ``python -m bench recall_floor``.

The prompt recall cue and expand-query's ranking keep a dense hit only at or
above ``semantic_min_similarity``. This scenario is how its default was
chosen. The sessions of the paraphrase recall set (``bench/recall_set.jsonl``)
are imported into a fresh SQLite file; their user and assistant messages with
words (a text part, ``lcm.semantic.repository.SPOKEN``) are embedded as the
server embeds them (``role: text``, in chunks, a message scoring as its best
chunk), and each question, its dense query prepared as the default
``semantic_query_handling`` (``strip_roles``) prepares it, is scored:

- **answer**: the similarity of the best message that answers it (its own
  session), and whether that message is the nearest or among the nearest 4;
- **unrelated**: the best similarity the same question reaches in a session
  of *another* project (its answer cannot be there), and the best similarity
  a gateway's everyday prompts ("continue", "thanks") reach in every session.

For each candidate floor it prints the share of answers kept and the share
of unrelated prompts that would still recall something. The sessions must
be under ``../shared/data`` (see ``bench/recall_set.py``).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import select

from bench.recall_dense import _cached_embed
from bench.recall_import import line_client_ids
from bench.recall_set import RecallQuestion, load
from bench.transcripts import DATA
from lcm.db.engine import Database
from lcm.db.migrate import upgrade
from lcm.db.models import Message
from lcm.semantic.embedder import load_embedder
from lcm.semantic.query_text import dense_query, frequent_words
from lcm.semantic.repository import SPOKEN
from lcm.semantic.texts import chunks, message_text
from lcm.semantic_settings import SemanticTenantSettings
from lcm.settings import Settings
from lcm.tenants.service import create_tenant
from lcm.transcripts.importer import import_transcript
from lcm.transcripts.service import BootstrapOptions

FLOORS = (0.30, 0.35, 0.40, 0.45, 0.50, 0.55, 0.60)
# What a gateway sends as a prompt when it asks nothing of the history.
EVERYDAY_PROMPTS = (
    "continue",
    "thanks, that looks good",
    "ok",
    "yes, go ahead",
    "can you write me a haiku about autumn leaves?",
    "what's the weather like in Lisbon tomorrow?",
    "recommend a good recipe for banana bread",
    "hello! how are you today?",
    "please summarize the plot of Moby Dick",
    "translate 'good morning' into Spanish",
)


@dataclass
class Session:
    """One imported session: its prose messages' chunk vectors and owners."""

    source: str
    project: str
    vectors: Any  # (chunks, 384)
    owners: list[int]  # message id per chunk row
    by_line: dict[int, int]  # source line -> message id
    frequent: frozenset[str]

    def best(self, vector: Any) -> dict[int, float]:
        sims = (self.vectors @ vector).tolist()
        out: dict[int, float] = {}
        for owner, sim in zip(self.owners, sims, strict=True):
            if sim > out.get(owner, -1.0):
                out[owner] = sim
        return out


def run(args: argparse.Namespace) -> None:
    questions = load()
    sources = sorted({q.source for q in questions})
    if not all((DATA / s).exists() for s in sources):
        print(f"  the recall set's sessions are not under {DATA}: nothing to measure", flush=True)
        return
    embedder = load_embedder()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/floor.db"
        upgrade(url)
        database = Database(Settings(database_url=url, files_dir=Path(tmp) / "files"))
        sessions = {s: _import(database, embedder, s) for s in sources}
        database.dispose()
    answers, ranks, unrelated = _score(questions, sessions, embedder)
    everyday = [
        max(s.best(_embed(embedder, _handled(p, s))).values())
        for p in EVERYDAY_PROMPTS
        for s in sessions.values()
    ]
    _report(answers, ranks, unrelated, everyday)


def _import(database: Database, embedder: Any, source: str) -> Session:
    path = DATA / source
    with database.transaction() as session:
        tenant_id = create_tenant(session, f"floor-{path.stem}").tenant_id
    options = BootstrapOptions.from_settings(database.settings, None)
    outcome = import_transcript(
        database.transaction, tenant_id, f"floor-{path.stem}", path.read_bytes(), options
    )
    with database.read_session() as session:
        rows = session.execute(
            select(Message.id, Message.client_id, Message.role, Message.content).where(
                Message.conversation_id == outcome.conversation_id,
                Message.role.in_(("user", "assistant")),
                SPOKEN,
            )
        ).all()
    by_client = {r.client_id: r.id for r in rows if r.client_id}
    texts, owners = [], []
    for row in rows:
        for piece in chunks(message_text(row.role, row.content)):
            texts.append(piece)
            owners.append(row.id)
    vectors = _cached_embed(embedder, texts)
    by_line = {n: by_client[c] for n, c in line_client_ids(path).items() if c in by_client}
    frequent = frequent_words(message_text(r.role, r.content[:2_000]) for r in rows)
    print(f"  {source}: {len(rows)} prose messages, {len(texts)} chunks", flush=True)
    return Session(source, source.split("/")[0], vectors, owners, by_line, frequent)


def _handled(prompt: str, session: Session) -> str:
    """``prompt`` as the default query handling embeds it in ``session``."""
    handling = SemanticTenantSettings.model_fields["semantic_query_handling"].default
    return dense_query(prompt, handling, lambda: session.frequent)


def _embed(embedder: Any, text: str) -> Any:
    return embedder.embed([text])[0]


def _score(
    questions: Sequence[RecallQuestion], sessions: dict[str, Session], embedder: Any
) -> tuple[list[float], list[int], list[float]]:
    answers, ranks, unrelated = [], [], []
    for q in questions:
        own = sessions[q.source]
        vector = _embed(embedder, _handled(q.question, own))
        best = own.best(vector)
        wanted = {own.by_line[n] for group in q.answers for n in group if n in own.by_line}
        wanted &= set(best)
        if wanted:
            order = sorted(best, key=lambda m: -best[m])
            answers.append(max(best[m] for m in wanted))
            ranks.append(min(order.index(m) for m in wanted) + 1)
        for other in sessions.values():
            if other.project != own.project:
                unrelated.append(max(other.best(vector).values()))
    return answers, ranks, unrelated


def _report(
    answers: list[float], ranks: list[int], unrelated: list[float], everyday: list[float]
) -> None:
    def quantiles(values: list[float]) -> str:
        cuts = statistics.quantiles(values, n=20)
        return (
            f"p10 {cuts[1]:.3f}  p25 {cuts[4]:.3f}  p50 {cuts[9]:.3f}  "
            f"p90 {cuts[17]:.3f}  p95 {cuts[18]:.3f}  max {max(values):.3f}"
        )

    print(f"  answer (best answering message, {len(answers)} questions): {quantiles(answers)}")
    top1 = sum(r == 1 for r in ranks) / len(ranks)
    top4 = sum(r <= 4 for r in ranks) / len(ranks)
    print(f"    the answer is the nearest message: {top1:.2f}; among the nearest 4: {top4:.2f}")
    print(f"  unrelated (another project's questions, {len(unrelated)}): {quantiles(unrelated)}")
    print(f"  everyday prompts x sessions ({len(everyday)}): {quantiles(everyday)}")
    print(f"  {'floor':>6} {'answers kept':>13} {'unrelated recall':>17} {'everyday recall':>16}")
    for floor in FLOORS:
        kept = sum(a >= floor for a in answers) / len(answers)
        stray = sum(u >= floor for u in unrelated) / len(unrelated)
        idle = sum(e >= floor for e in everyday) / len(everyday)
        print(f"  {floor:>6.2f} {kept:>13.2f} {stray:>17.2f} {idle:>16.2f}", flush=True)

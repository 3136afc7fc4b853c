"""Embedding as background work: after commit, never on the ingest path.

Every unit of work that writes messages or summaries asks for an
:class:`~lcm.outbox.EmbedConversation` job (:func:`request_embedding`), sent
only after it commits and only where semantic recall is on. The job
(:func:`embed_conversation`) reads the conversation's texts that have no
vector of the current model, embeds them outside any transaction (the model
is CPU work: ~120 short texts/s on 2 cores) and writes the vectors in a short
transaction of its own, a batch at a time.

What a lost job, a crash or a model change leaves is found by the backfill
(:func:`run_backfill`): beat runs it every ``semantic_backfill_interval_seconds``
and ``lcm reindex`` runs it at once with a progress bar. It deletes vectors
of other models and embeds everything still waiting, under one lease
(``embedding_runs``), so two backfills never run together.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy.orm import Session

from lcm.db import Transaction, utcnow
from lcm.errors import StaleLease
from lcm.outbox import EmbedConversation, request_job
from lcm.secrets import content_masks, mask_ranges
from lcm.semantic.embedder import Embedder
from lcm.semantic.pending import Cursor, Pending
from lcm.semantic.repository import EmbeddingRepository, EmbeddingRunRepository
from lcm.semantic.texts import chunks, message_text
from lcm.semantic_settings import SEMANTIC_ON

LEASE = "embeddings"
OnProgress = Callable[[int, int], None]


def request_embedding(session: Session, conversation_id: int) -> None:
    """Embed what this unit of work wrote once it commits (only where semantic is on)."""
    if session.info.get(SEMANTIC_ON):
        request_job(session, EmbedConversation(conversation_id))


def embed_conversation(
    transaction: Transaction,
    embedder: Embedder,
    conversation_id: int,
    batch: int,
    lease_seconds: int = 120,
) -> int:
    """Embed the conversation's texts without a vector; how many were embedded.

    One job at a time per conversation: every write to a conversation asks
    for a job, and a worker's threads (16 by default) would otherwise take
    several of them at once and embed the same waiting texts side by side,
    each throwing away all but one result. The job holds a lease named after
    the conversation (``embedding_runs``); a job that finds it held leaves at
    once, and the holder, once it has let go, looks for waiting texts again,
    so what that job was sent for is embedded by the holder. The lease is
    renewed with each batch's write: a holder stalled past ``lease_seconds``
    loses it to the next job and stops at its next write. Still safe to run
    beside a backfill: a text embedded twice is written once
    (``EmbeddingRepository.store``).
    """
    name, owner, model = f"conversation:{conversation_id}", uuid.uuid4().hex, embedder.model_name
    lease = _Lease(name, owner, lease_seconds)
    embedded = 0
    for _round in range(_ROUNDS):
        with transaction() as session:
            now = utcnow()
            until = now + timedelta(seconds=lease_seconds)
            if not EmbeddingRunRepository(session).take(name, owner, model, until, now):
                return embedded  # the holder looks again after it lets go
        try:
            embedded += _drain(transaction, embedder, conversation_id, batch, lease)
        finally:
            with transaction() as session:
                EmbeddingRunRepository(session).release(name, owner)
        # A job sent while we held the lease left at once: what it was sent
        # for was committed before it looked, so before this read.
        with transaction() as session:
            if not EmbeddingRepository(session).pending(model, conversation_id, 1):
                return embedded
    return embedded


_ROUNDS = 8  # bounds the look-again loop should a text never get its vector


@dataclass(frozen=True, slots=True)
class _Lease:
    name: str
    owner: str
    seconds: int


def _drain(
    transaction: Transaction, embedder: Embedder, conversation_id: int, batch: int, lease: _Lease
) -> int:
    """Embed the conversation's waiting texts, a batch at a time, walking a cursor."""
    embedded, cursor = 0, Cursor()
    while True:
        with transaction() as session:
            repo = EmbeddingRepository(session)
            pending = _masked(
                session, repo.pending(embedder.model_name, conversation_id, batch, cursor)
            )
        if not pending:
            return embedded
        rows = vector_rows(embedder, pending)
        with transaction() as session:
            until = utcnow() + timedelta(seconds=lease.seconds)
            runs = EmbeddingRunRepository(session)
            if not runs.renew(lease.name, lease.owner, until, embedded + len(pending), 0):
                return embedded  # taken over after a stall: the new holder goes on
            EmbeddingRepository(session).store(rows)
        embedded += len(pending)
        cursor = cursor.past(pending)
        if len(pending) < batch:
            return embedded


@dataclass(frozen=True, slots=True)
class BackfillResult:
    embedded: int
    deleted: int  # vectors of other models


def run_backfill(
    transaction: Transaction,
    embedder: Embedder,
    batch: int,
    lease_seconds: int,
    on_progress: OnProgress | None = None,
) -> BackfillResult | None:
    """Delete other models' vectors and embed every waiting text; ``None`` if one runs already.

    The lease is renewed in the same transaction as each batch's write: a
    run whose lease expired and was taken over (it stalled past
    ``lease_seconds``) fails that renewal and writes nothing more.
    """
    owner, model = uuid.uuid4().hex, embedder.model_name
    with transaction() as session:
        now = utcnow()
        runs = EmbeddingRunRepository(session)
        if not runs.take(LEASE, owner, model, now + timedelta(seconds=lease_seconds), now):
            return None
        total = EmbeddingRepository(session).count_pending(model)
    embedded = deleted = 0
    cursor = Cursor()
    while True:
        with transaction() as session:
            repo = EmbeddingRepository(session)
            removed = repo.delete_other_models(model, batch * 8)
            pending = _masked(session, repo.pending(model, None, batch, cursor, utcnow()))
        cursor = cursor.past(pending)
        rows = vector_rows(embedder, pending)
        with transaction() as session:
            until = utcnow() + timedelta(seconds=lease_seconds)
            done = embedded + len(pending)
            if not EmbeddingRunRepository(session).renew(LEASE, owner, until, done, total):
                raise StaleLease("the embedding backfill lost its lease to another run")
            EmbeddingRepository(session).store(rows)
        embedded, deleted = done, deleted + removed
        if on_progress is not None:
            on_progress(embedded, max(total, embedded))
        if not pending and not removed:
            break
    with transaction() as session:
        EmbeddingRunRepository(session).finish(LEASE, owner, utcnow())
    return BackfillResult(embedded, deleted)


def vector_rows(embedder: Embedder, pending: Sequence[Pending]) -> list[dict[str, Any]]:
    """The rows to store for ``pending``: one per chunk, vectors as bytes and as pgvector text."""
    texts: list[str] = []
    owners: list[tuple[Pending, int]] = []
    for item in pending:
        text = message_text(item.role or "", item.text) if item.target == "message" else item.text
        for number, piece in enumerate(chunks(text)):
            texts.append(piece)
            owners.append((item, number))
    vectors = embedder.embed(texts)
    now = utcnow()
    rows = []
    for (item, number), vector in zip(owners, vectors, strict=True):
        rows.append(
            {
                "tenant_id": item.tenant_id,
                "conversation_id": item.conversation_id,
                "target": item.target,
                "source": item.source,
                "message_id": item.message_id,
                "chunk": number,
                "model": embedder.model_name,
                "dimension": embedder.dimension,
                "at": item.at,
                "created_at": now,
                "vector": vector.astype("<f4").tobytes(),
                "embedding": "[" + ",".join(f"{x:.6g}" for x in vector.tolist()) + "]",
            }
        )
    return rows


def _masked(session: Session, pending: list[Pending]) -> list[Pending]:
    """Messages with their detected secrets masked: a vector is never built from a secret."""
    by_tenant: dict[str, list[int]] = defaultdict(list)
    for item in pending:
        if item.message_id is not None:
            by_tenant[item.tenant_id].append(item.message_id)
    masks: dict[int, Any] = {}
    for tenant_id, ids in by_tenant.items():
        masks.update(content_masks(session, tenant_id, ids))
    if not masks:
        return pending
    out = []
    for item in pending:
        spans = masks.get(item.message_id or -1)
        if spans:
            text, _ranges = mask_ranges(item.text, spans, [])
            item = Pending(
                item.target,
                item.source,
                item.tenant_id,
                item.conversation_id,
                item.message_id,
                item.at,
                text,
                item.role,
            )
        out.append(item)
    return out

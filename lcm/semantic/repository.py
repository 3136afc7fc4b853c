"""All SQL of semantic recall: texts waiting for a vector, vectors written and scanned, the lease.

A text "waits" when it has no row in ``embeddings`` under the current model
name (a message only when it has words, :data:`SPOKEN`): there is no separate
backlog table to keep in step, so a lost job, a crash or a model change all
leave the same thing behind, which the next embed job or backfill finds (an
anti-join on ``(message_id, model)`` or ``(source, chunk, model)``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    String,
    and_,
    cast,
    delete,
    exists,
    func,
    literal,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from lcm.db.models import Embedding, EmbeddingRun, LargeFile, Message, MessagePart, Summary
from lcm.semantic.nearest_repository import NearestRepository
from lcm.semantic.pending import Cursor, Pending

_PGVECTOR_COLUMN: dict[str, bool] = {}  # per database URL: has migration 0028 added it
Scope = Callable[[Any], list[Any]]  # a conversation id column -> the conditions on it
# A message is embedded when it says something in words: it has a non-empty
# text part. Tool calls, tool output and reasoning without one are machine
# text the full-text side finds by its words; embedded, they crowded the
# dense side out of what was said. On the recall set (bench recall, 201
# paraphrase questions over real coding sessions, 78% of vectors tool
# traffic) dense recall@10 was 0.693 over every message and 0.872 over
# messages with text; adding reasoning-only turns back took it to 0.788.
SPOKEN = exists().where(
    MessagePart.message_id == Message.id,
    MessagePart.part_type == "text",
    MessagePart.text != "",
)


@dataclass(frozen=True, slots=True)
class VectorRow:
    """One stored vector as a search reads it."""

    target: str
    source: str
    conversation_id: int
    vector: bytes


class EmbeddingRepository:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.dialect = session.get_bind().dialect.name

    @property
    def uses_pgvector(self) -> bool:
        """True on Postgres where migration 0028 found pgvector (the ``embedding`` column)."""
        if self.dialect != "postgresql":
            return False
        key = str(self.session.get_bind().engine.url)
        if key not in _PGVECTOR_COLUMN:
            _PGVECTOR_COLUMN[key] = bool(
                self.session.scalar(
                    text(
                        "SELECT 1 FROM information_schema.columns WHERE table_name = 'embeddings' "
                        "AND column_name = 'embedding' AND table_schema = current_schema()"
                    )
                )
            )
        return _PGVECTOR_COLUMN[key]

    # --- waiting texts -------------------------------------------------------

    def pending(
        self,
        model: str,
        conversation_id: int | None,
        limit: int,
        after: Cursor | None = None,
        skip_leased_at: datetime | None = None,
    ) -> list[Pending]:
        """Up to ``limit`` texts without a ``model`` vector (one conversation, or all),
        past ``after``: messages first, by id, then summaries and files, by id.

        ``skip_leased_at``: leave out conversations whose embed job holds its
        lease at that time (the backfill: that job embeds them, and looks
        again before it lets go).
        """
        after = after or Cursor()

        def scope(column: Any) -> list[Any]:
            conditions = [] if conversation_id is None else [column == conversation_id]
            if skip_leased_at is not None:
                name = literal("conversation:") + cast(column, String)
                leased = and_(EmbeddingRun.name == name, EmbeddingRun.expires_at > skip_leased_at)
                conditions.append(~exists().where(leased))
            return conditions

        found = self._pending_messages(model, scope, limit, after.message_id)
        if len(found) < limit:
            found += self._pending_summaries(model, scope, limit - len(found), after.summary_id)
        if len(found) < limit:
            found += self._pending_files(model, scope, limit - len(found), after.file_id)
        return found

    def _pending_messages(self, model: str, scope: Scope, limit: int, after: int) -> list[Pending]:
        done = exists().where(and_(Embedding.message_id == Message.id, Embedding.model == model))
        query = select(
            Message.id,
            Message.tenant_id,
            Message.conversation_id,
            Message.created_at,
            Message.content,
            Message.role,
        ).where(~done, SPOKEN, Message.id > after, *scope(Message.conversation_id))
        rows = self.session.execute(query.order_by(Message.id).limit(limit)).all()
        return [Pending("message", f"msg_{r[0]}", r[1], r[2], r[0], r[3], r[4], r[5]) for r in rows]

    def _pending_summaries(self, model: str, scope: Scope, limit: int, after: str) -> list[Pending]:
        done = exists().where(and_(Embedding.source == Summary.id, Embedding.model == model))
        query = select(
            Summary.id,
            Summary.tenant_id,
            Summary.conversation_id,
            Summary.latest_at,
            Summary.content,
        ).where(~done, Summary.id > after, *scope(Summary.conversation_id))
        rows = self.session.execute(query.order_by(Summary.id).limit(limit)).all()
        return [Pending("summary", r[0], r[1], r[2], None, r[3], r[4]) for r in rows]

    def _pending_files(self, model: str, scope: Scope, limit: int, after: str) -> list[Pending]:
        done = exists().where(and_(Embedding.source == LargeFile.id, Embedding.model == model))
        query = select(
            LargeFile.id,
            LargeFile.tenant_id,
            LargeFile.conversation_id,
            LargeFile.created_at,
            LargeFile.exploration_summary,
        ).where(
            LargeFile.exploration_summary.is_not(None),
            ~done,
            LargeFile.id > after,
            *scope(LargeFile.conversation_id),
        )
        rows = self.session.execute(query.order_by(LargeFile.id).limit(limit)).all()
        return [Pending("file", r[0], r[1], r[2], None, r[3], r[4] or "") for r in rows]

    def count_pending(self, model: str) -> int:
        """How many texts wait for a ``model`` vector (a reindex's progress total)."""
        messages = self.session.scalar(
            select(func.count())
            .where(
                ~exists().where(and_(Embedding.message_id == Message.id, Embedding.model == model)),
                SPOKEN,
            )
            .select_from(Message)
        )
        summaries = self.session.scalar(
            select(func.count())
            .where(~exists().where(and_(Embedding.source == Summary.id, Embedding.model == model)))
            .select_from(Summary)
        )
        return int(messages or 0) + int(summaries or 0)

    # --- vectors -------------------------------------------------------------

    def store(self, rows: Sequence[dict[str, Any]]) -> None:
        """Insert vectors; a row already there (another job embedded it) is left as it is.

        Two embed jobs may take the same waiting text (a second ingest's job
        runs while the first's is still embedding): the unique key
        ``(source, chunk, model)`` keeps one row and the other insert does
        nothing, so the race costs CPU, never a duplicate.
        """
        if not rows:
            return
        if self.uses_pgvector:
            self.session.execute(
                text(
                    "INSERT INTO embeddings (tenant_id, conversation_id, target, source, "
                    "message_id, chunk, model, dimension, at, created_at, embedding) VALUES "
                    "(:tenant_id, :conversation_id, :target, :source, :message_id, :chunk, "
                    ":model, :dimension, :at, :created_at, CAST(:embedding AS vector)) "
                    "ON CONFLICT (source, chunk, model) DO NOTHING"
                ),
                list(rows),
            )
            return
        make = pg_insert if self.dialect == "postgresql" else sqlite_insert
        statement = make(Embedding).on_conflict_do_nothing(
            index_elements=["source", "chunk", "model"]
        )
        self.session.execute(
            statement, [{k: v for k, v in r.items() if k != "embedding"} for r in rows]
        )

    def delete_other_models(self, model: str, limit: int) -> int:
        """Delete up to ``limit`` vectors written by another model; how many went."""
        ids = select(Embedding.id).where(Embedding.model != model).limit(limit)
        result: Any = self.session.execute(delete(Embedding).where(Embedding.id.in_(ids)))
        return int(result.rowcount or 0)

    def delete_conversations(self, ids: Sequence[int]) -> None:
        self.session.execute(delete(Embedding).where(Embedding.conversation_id.in_(ids)))

    def scan(
        self,
        tenant_id: str,
        model: str,
        conversation_ids: Sequence[int] | None,
        targets: Sequence[str],
        since: datetime | None,
        before: datetime | None,
    ) -> Iterator[VectorRow]:
        """Every stored vector of the tenant in bounds, streamed (the exact search)."""
        query = select(
            Embedding.target, Embedding.source, Embedding.conversation_id, Embedding.vector
        ).where(*self._bounds(tenant_id, model, conversation_ids, targets, since, before))
        for row in self.session.execute(query.execution_options(yield_per=2_000)):
            if row[3] is not None:
                yield VectorRow(row[0], row[1], row[2], row[3])

    def nearest(
        self,
        tenant_id: str,
        model: str,
        conversation_ids: Sequence[int] | None,
        targets: Sequence[str],
        since: datetime | None,
        before: datetime | None,
        query_vector: Sequence[float],
        want: int,
    ) -> list[tuple[str, str, int, float]]:
        """pgvector: the nearest (target, source, conversation, similarity) rows, read
        until ``want`` different texts are in (:mod:`lcm.semantic.nearest_repository`)."""
        bounds = self._bounds(tenant_id, model, conversation_ids, targets, since, before)
        return NearestRepository(self.session).nearest(bounds, targets, query_vector, want)

    def recent_texts(self, tenant_id: str, limit: int) -> list[str]:
        """The tenant's newest ``limit`` messages as embedded (``role: text``), for word counts."""
        rows = self.session.execute(
            select(Message.role, func.substr(Message.content, 1, 2_000))
            .where(Message.tenant_id == tenant_id)
            .order_by(Message.created_at.desc())
            .limit(limit)
        ).all()
        return [f"{role}: {content}" for role, content in rows]

    def _bounds(
        self,
        tenant_id: str,
        model: str,
        conversation_ids: Sequence[int] | None,
        targets: Sequence[str],
        since: datetime | None,
        before: datetime | None,
    ) -> list[Any]:
        conditions: list[Any] = [
            Embedding.tenant_id == tenant_id,
            Embedding.model == model,
            Embedding.target.in_(list(targets)),
        ]
        if conversation_ids is not None:
            conditions.append(Embedding.conversation_id.in_(list(conversation_ids)))
        if since is not None:
            conditions.append(Embedding.at >= since)
        if before is not None:
            conditions.append(Embedding.at < before)
        return conditions


class EmbeddingRunRepository:
    """The lease row of a backfill (``embedding_runs``): who runs it, until when, how far."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.dialect = session.get_bind().dialect.name

    def take(self, name: str, owner: str, model: str, until: datetime, now: datetime) -> bool:
        """Hold the lease ``name`` until ``until``: True when this caller now holds it.

        The insert does nothing when the row exists (a concurrent insert waits
        for the other transaction and then finds the row); the update then
        takes the row only when its lease ran out, so of two callers at most
        one gets it, on either database.
        """
        make = pg_insert if self.dialect == "postgresql" else sqlite_insert
        inserted = self.session.scalar(
            make(EmbeddingRun)
            .values(
                name=name,
                owner=owner,
                expires_at=until,
                model=model,
                done=0,
                total=0,
                started_at=now,
            )
            .on_conflict_do_nothing(index_elements=["name"])
            .returning(EmbeddingRun.name)
        )
        if inserted is not None:
            return True
        taken: Any = self.session.execute(
            update(EmbeddingRun)
            .where(EmbeddingRun.name == name, EmbeddingRun.expires_at < now)
            .values(
                owner=owner,
                expires_at=until,
                model=model,
                done=0,
                total=0,
                started_at=now,
                finished_at=None,
            )
        )
        return bool(taken.rowcount)

    def renew(self, name: str, owner: str, until: datetime, done: int, total: int) -> bool:
        """Extend our lease and record progress; False when it is no longer ours (stop)."""
        result: Any = self.session.execute(
            update(EmbeddingRun)
            .where(EmbeddingRun.name == name, EmbeddingRun.owner == owner)
            .values(expires_at=until, done=done, total=total)
        )
        return bool(result.rowcount)

    def release(self, name: str, owner: str) -> None:
        """Let go of a per-conversation lease: its row goes (one row per job, not per
        conversation ever embedded)."""
        self.session.execute(
            delete(EmbeddingRun).where(EmbeddingRun.name == name, EmbeddingRun.owner == owner)
        )

    def finish(self, name: str, owner: str, now: datetime) -> None:
        self.session.execute(
            update(EmbeddingRun)
            .where(EmbeddingRun.name == name, EmbeddingRun.owner == owner)
            .values(expires_at=now, finished_at=now)
        )

    def get(self, name: str) -> EmbeddingRun | None:
        return self.session.get(EmbeddingRun, name)

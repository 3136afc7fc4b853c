"""All SQL of compaction: loading the context, writing a pass, its history."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    Table,
    bindparam,
    delete,
    func,
    insert,
    select,
    text,
    update,
)
from sqlalchemy import inspect as sa_inspect
from sqlalchemy.orm import Session

from lcm.compaction.pass_statement import REPLACE_RANGE, pass_params
from lcm.context import (
    ContextEntry,
)
from lcm.context_store.repository import load_context
from lcm.db.driver import DriverStatement
from lcm.db.models import (
    Base,
    CompactionRun,
    ContextItem,
    Conversation,
    LlmUsage,
    Summary,
    SummaryMessage,
    SummaryParent,
    Tenant,
)

SUMMARY_MESSAGES: Table = SummaryMessage.__table__  # type: ignore[assignment]
SUMMARY_PARENTS: Table = SummaryParent.__table__  # type: ignore[assignment]


class CompactionRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    # --- reading the context ---------------------------------------------

    def load_entries(
        self, conversation_id: int, from_ordinal: int | None = None
    ) -> list[ContextEntry]:
        """The conversation's context items in order (``from_ordinal``: a suffix of it)."""
        return load_context(self.session, conversation_id, from_ordinal)

    def overrides_and_model(
        self, conversation_id: int
    ) -> tuple[dict[str, Any], str | None, int | None, str | None]:
        """What a pass's settings depend on, in one read: the tenant's stored
        overrides, the model (and context window) of the latest turn and the
        conversation's session key."""
        row = _OVERRIDES_AND_MODEL.run(
            self.session, {"conversation_id": conversation_id}
        ).one_or_none()
        if row is None:
            return {}, None, None, None
        return dict(row[0] or {}), row[1], row[2], row[3]

    def context_token_total(self, conversation_id: int) -> int:
        """What the whole context costs: the sum the threshold is checked against."""
        params = {"conversation_id": conversation_id}
        return int(_CONTEXT_TOKENS.run(self.session, params).scalar() or 0)

    def lock_conversation(self, conversation_id: int) -> Conversation | None:
        """Row-lock the conversation: serializes a pass's commit with ingest."""
        return self.session.scalar(
            select(Conversation).where(Conversation.id == conversation_id).with_for_update()
        )

    # --- writing a pass ---------------------------------------------------
    #
    # A pass's commit runs on every compaction, so it is written as few
    # plain statements: no ORM unit of work, no statement whose only job is
    # a check another statement can answer too.

    def bump_context_version(self, conversation_id: int) -> bool:
        """Lock the conversation row and bump ``context_version``; False if it was erased.

        The row lock serializes a pass's commit with ingest and with any other
        pass on the conversation, so the checks that follow see settled state.
        The bump is undone with the rest if a check then fails.
        """
        bumped = _BUMP.run(self.session, {"conversation_id": conversation_id})
        return bumped.scalar() is not None

    def take_range(self, conversation_id: int, first: int, last: int) -> list[tuple[Any, ...]]:
        """Delete the items in [first, last]; their (ordinal, message_id, summary_id) in order.

        The caller compares what was deleted with what it planned (and rolls
        back if they differ), which spares a separate read of the range.
        """
        rows = _TAKE_RANGE.run(
            self.session, {"conversation_id": conversation_id, "first": first, "last": last}
        )
        return sorted(tuple(r) for r in rows)

    def insert_summary(self, summary: Summary) -> None:
        _insert(self.session, [summary])

    def link_messages(self, tenant_id: str, summary_id: str, message_ids: Sequence[int]) -> None:
        self._link(SUMMARY_MESSAGES, "message_id", tenant_id, summary_id, message_ids)

    def link_parents(self, tenant_id: str, summary_id: str, parent_ids: Sequence[str]) -> None:
        self._link(SUMMARY_PARENTS, "parent_id", tenant_id, summary_id, parent_ids)

    def _link(
        self,
        table: Table,
        column: str,
        tenant_id: str,
        summary_id: str,
        sources: Sequence[int] | Sequence[str],
    ) -> None:
        """The summary's links to its sources, in order.

        On Postgres one ``INSERT … SELECT FROM unnest(array)``: one statement
        of fixed text, whatever the count (a leaf links a hundred messages,
        which ``executemany`` would send as a hundred statements). SQLite
        runs in process, where ``executemany`` costs little.
        """
        if self.session.get_bind().dialect.name == "postgresql":
            _LINK_MANY[table].run(
                self.session,
                {"summary_id": summary_id, "tenant_id": tenant_id, "sources": list(sources)},
            )
            return
        self.session.connection().execute(
            insert(table),
            [
                {"summary_id": summary_id, column: source, "tenant_id": tenant_id, "ordinal": i}
                for i, source in enumerate(sources)
            ],
        )

    def replace_range(
        self,
        last: int,
        summary: Summary,
        sources: Sequence[int] | Sequence[str],
        item: ContextItem,
        run: CompactionRun,
        usage: Sequence[LlmUsage],
    ) -> list[tuple[Any, ...]]:
        """A pass's write: the items from ``item``'s ordinal to ``last`` give way to ``item``.

        Deletes the items in that range of ``item``'s conversation and
        writes the summary, its links to ``sources`` in order, ``item`` in
        the range's place, the run and its LLM usage. Returns what was
        deleted, ``(ordinal, message_id, summary_id)`` in order: the caller
        compares it with what it planned and, if they differ, raises so that
        the transaction rolls back with everything written here. Only the
        replaced rows are touched: other ordinals never move, so the cost of
        a pass does not grow with the conversation.

        On Postgres one statement (data-modifying ``WITH``,
        :mod:`lcm.compaction.pass_statement`): a pass commits on every
        compaction, and six statements cost six round trips and six times
        the driver's work for rows that always go together. Elsewhere
        (SQLite, in process) one plain statement each.
        """
        if self.session.get_bind().dialect.name == "postgresql":
            rows = (
                REPLACE_RANGE[summary.kind == "leaf"]
                .run(self.session, pass_params(last, summary, sources, item, run, usage))
                .all()
            )
            return sorted(tuple(r) for r in rows)
        taken = self.take_range(item.conversation_id, item.ordinal, last)
        self.insert_summary(summary)
        if summary.kind == "leaf":
            self.link_messages(summary.tenant_id, summary.id, cast(Sequence[int], sources))
        else:
            self.link_parents(summary.tenant_id, summary.id, cast(Sequence[str], sources))
        _insert(self.session, [item])
        self.record_run(run)
        self.record_usage(usage)
        return taken

    def newest_runs_since(self, conversation_id: int, since: datetime, n: int) -> list[datetime]:
        """When the ``n`` newest passes since ``since`` ran, newest first.

        Every pass (a summary, a repair, a failure) is one summarization call
        for the per-conversation call guard (``lcm.compaction.call_guard``).
        """
        return list(
            self.session.scalars(
                select(CompactionRun.created_at)
                .where(
                    CompactionRun.conversation_id == conversation_id,
                    CompactionRun.created_at >= since,
                )
                .order_by(CompactionRun.created_at.desc(), CompactionRun.id.desc())
                .limit(n)
            )
        )

    def record_run(self, run: CompactionRun) -> None:
        _insert(self.session, [run])

    def record_usage(self, rows: Sequence[LlmUsage]) -> None:
        _insert(self.session, rows)

    # --- reading the DAG --------------------------------------------------

    def reachable_message_ids(self, conversation_id: int) -> list[int]:
        """Every message id reachable from the current context, with repetition.

        Walks context items -> summaries -> parent summaries -> source messages.
        Lossless means this is each of the conversation's messages exactly once.
        """
        in_context = ContextItem.conversation_id == conversation_id
        found: list[int] = list(
            self.session.scalars(
                select(ContextItem.message_id).where(
                    in_context, ContextItem.message_id.is_not(None)
                )
            )
        )
        frontier = list(
            self.session.scalars(
                select(ContextItem.summary_id).where(
                    in_context, ContextItem.summary_id.is_not(None)
                )
            )
        )
        while frontier:
            found.extend(
                self.session.scalars(
                    select(SummaryMessage.message_id).where(SummaryMessage.summary_id.in_(frontier))
                )
            )
            frontier = list(
                self.session.scalars(
                    select(SummaryParent.parent_id).where(SummaryParent.summary_id.in_(frontier))
                )
            )
        return found

    def summary_counts_by_depth(self, conversation_id: int) -> dict[int, int]:
        return {
            int(depth): int(count)
            for depth, count in self.session.execute(
                select(Summary.depth, func.count())
                .where(Summary.conversation_id == conversation_id)
                .group_by(Summary.depth)
            )
        }


# Built once with bound parameters: every pass runs these, and building a
# statement per call costs several times the CPU of executing it (see
# ``debt_repository``). They run on the driver (``lcm.db.driver``), past the ORM.

_IN_CONVERSATION = ContextItem.conversation_id == bindparam("conversation_id")
# Every turn checks its threshold against this sum (an index range scan).
_CONTEXT_TOKENS = DriverStatement(
    select(func.coalesce(func.sum(ContextItem.token_count), 0)).where(_IN_CONVERSATION)
)
_OVERRIDES_AND_MODEL = DriverStatement(
    select(
        Tenant.settings_overrides,
        Conversation.model_id,
        Conversation.context_window,
        Conversation.session_key,
    )
    .join(Tenant, Tenant.id == Conversation.tenant_id)
    .where(Conversation.id == bindparam("conversation_id"))
)

_BUMP = DriverStatement(
    update(Conversation)
    .where(Conversation.id == bindparam("conversation_id"))
    .values(context_version=Conversation.context_version + 1)
    .returning(Conversation.id)
)

_TAKE_RANGE = DriverStatement(
    delete(ContextItem)
    .where(
        ContextItem.conversation_id == bindparam("conversation_id"),
        ContextItem.ordinal.between(bindparam("first"), bindparam("last")),
    )
    .returning(ContextItem.ordinal, ContextItem.message_id, ContextItem.summary_id)
)


def _link_many(table: Table, column: str, sql_type: str) -> DriverStatement:
    """Postgres: a summary's links from one array, in its order (``_link``)."""
    return DriverStatement(
        text(
            f"INSERT INTO {table.name} (summary_id, {column}, tenant_id, ordinal) "
            f"SELECT :summary_id, source, :tenant_id, position - 1 "
            f"FROM unnest(CAST(:sources AS {sql_type}[])) WITH ORDINALITY AS s(source, position)"
        )
    )


_LINK_MANY = {
    SUMMARY_MESSAGES: _link_many(SUMMARY_MESSAGES, "message_id", "BIGINT"),
    SUMMARY_PARENTS: _link_many(SUMMARY_PARENTS, "parent_id", "VARCHAR"),
}


def _insert(session: Session, objects: Sequence[Base]) -> None:
    """Insert new ORM objects of one class with plain ``INSERT``s, not the unit of work.

    Only the attributes set on each object are sent; column defaults fill in
    the rest. The objects stay detached (nothing reads them back).
    """
    if not objects:
        return
    mapper = sa_inspect(objects[0]).mapper
    keys = [(attr.key, attr.columns[0].key) for attr in mapper.column_attrs]
    rows = []
    for obj in objects:
        state = vars(obj)
        rows.append({column: state[key] for key, column in keys if key in state})
    table = cast(Table, mapper.local_table)
    session.connection().execute(insert(table), rows[0] if len(rows) == 1 else rows)

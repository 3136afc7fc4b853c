"""Postgres: a compaction pass's range replaced in one statement.

A pass removes its planned range of context items and writes its summary,
its links to what it summarizes (in order), the context item that takes the
range's place, its run and its LLM usage: always together, on every pass.
As one data-modifying ``WITH`` statement they cost one round trip and one
statement's driver work instead of six. The statement returns the items it
removed; the caller compares them with its plan and rolls the whole
transaction back if they differ. The foreign keys to the new summary are
checked at the end of the statement, so the sibling inserts see it.
``CompactionRepository.replace_range`` runs it (and plain statements
elsewhere).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any, cast

from sqlalchemy import BindParameter, Column, Table, TextClause, bindparam, text
from sqlalchemy import inspect as sa_inspect
from sqlalchemy.dialects import postgresql

from lcm.db.driver import DriverStatement
from lcm.db.models import (
    Base,
    CompactionRun,
    ContextItem,
    LlmUsage,
    Summary,
    SummaryMessage,
    SummaryParent,
)

SUMMARY_MESSAGES: Table = SummaryMessage.__table__  # type: ignore[assignment]
SUMMARY_PARENTS: Table = SummaryParent.__table__  # type: ignore[assignment]


def pass_params(
    last: int,
    summary: Summary,
    sources: Sequence[int] | Sequence[str],
    item: ContextItem,
    run: CompactionRun,
    usage: Sequence[LlmUsage],
) -> dict[str, Any]:
    """The parameters of ``REPLACE_RANGE``: the range is ``item``'s ordinal to ``last``."""
    params: dict[str, Any] = {"sources": list(sources), "last": last}
    for prefix, obj in (("s", summary), ("i", item), ("r", run)):
        params.update({f"{prefix}_{k}": v for k, v in _row(obj).items()})
    rows = [_row(u) for u in usage]
    params.update({f"u_{c.name}": [r[c.name] for r in rows] for c in _columns(LLM_USAGE)})
    return params


LLM_USAGE: Table = LlmUsage.__table__  # type: ignore[assignment]


@cache  # per table: every pass asks for the same four tables' columns
def _columns(table: Table) -> tuple[Column[Any], ...]:
    """The columns an insert writes: all but the generated key and computed ones."""
    return tuple(
        c for c in table.columns if c.computed is None and c is not table.autoincrement_column
    )


def _row(obj: Base) -> dict[str, Any]:
    """``obj``'s column values as an ORM insert would send them, Python defaults applied."""
    table = cast(Table, sa_inspect(obj).mapper.local_table)
    state = vars(obj)
    row = {}
    for column in _columns(table):
        value = state.get(column.key)
        # Every column is written, so a database-side default would be
        # overwritten with NULL: none of these tables has one (yet).
        assert column.server_default is None, f"{table.name}.{column.name} has a server default"
        if value is None and column.default is not None:
            default = column.default
            value = default.arg(None) if default.is_callable else default.arg  # type: ignore[attr-defined]
        row[column.name] = value
    return row


def _replace_range(links: Table) -> TextClause:
    """Postgres: a pass's range removed and its rows written, in one statement."""

    def values(prefix: str, table: Table) -> tuple[str, list[BindParameter[Any]]]:
        cols = _columns(table)
        sql = (
            f"INSERT INTO {table.name} ({', '.join(c.name for c in cols)}) "
            f"VALUES ({', '.join(f':{prefix}_{c.name}' for c in cols)})"
        )
        return sql, [bindparam(f"{prefix}_{c.name}", type_=c.type) for c in cols]

    summary_sql, summary_params = values("s", SUMMARIES)
    pg = postgresql.dialect()
    # Not ``VALUES``: the item's row is selected (see below), where a
    # parameter's type is not taken from its column, hence the casts.
    item_cols = _columns(CONTEXT_ITEMS)
    item_params = [bindparam(f"i_{c.name}", type_=c.type) for c in item_cols]
    item_row = ", ".join(f"CAST(:i_{c.name} AS {c.type.compile(dialect=pg)})" for c in item_cols)
    run_sql, run_params = values("r", COMPACTION_RUNS)
    usage_cols = _columns(LLM_USAGE)
    arrays = ", ".join(f"CAST(:u_{c.name} AS {c.type.compile(dialect=pg)}[])" for c in usage_cols)
    source = "message_id" if links is SUMMARY_MESSAGES else "parent_id"
    source_type = "BIGINT" if links is SUMMARY_MESSAGES else "VARCHAR"
    return text(
        f"WITH taken AS (DELETE FROM {CONTEXT_ITEMS.name} "
        f"WHERE conversation_id = :i_conversation_id AND ordinal BETWEEN :i_ordinal AND :last "
        f"RETURNING ordinal, message_id, summary_id), "
        f"summary AS ({summary_sql}), "
        f"links AS (INSERT INTO {links.name} (summary_id, {source}, tenant_id, ordinal) "
        f"SELECT :s_id, source, :s_tenant_id, position - 1 "
        f"FROM unnest(CAST(:sources AS {source_type}[])) WITH ORDINALITY AS l(source, position)), "
        # The new item goes where the first removed one was: it reads the
        # count of ``taken`` so that the removal has run to its end before it
        # (sibling sub-statements otherwise run in no set order, and the
        # unique (conversation_id, ordinal) is checked row by row).
        f"item AS (INSERT INTO {CONTEXT_ITEMS.name} ({', '.join(c.name for c in item_cols)}) "
        f"SELECT {item_row} "
        f"FROM (SELECT count(*) FROM taken) AS range_removed), "
        f"run AS ({run_sql}), "
        f"usage AS (INSERT INTO {LLM_USAGE.name} ({', '.join(c.name for c in usage_cols)}) "
        f"SELECT * FROM unnest({arrays})) "
        f"SELECT ordinal, message_id, summary_id FROM taken"
    ).bindparams(*summary_params, *item_params, *run_params)


SUMMARIES: Table = Summary.__table__  # type: ignore[assignment]
CONTEXT_ITEMS: Table = ContextItem.__table__  # type: ignore[assignment]
COMPACTION_RUNS: Table = CompactionRun.__table__  # type: ignore[assignment]


# By "is a leaf" (links to messages) or not (links to parent summaries).
REPLACE_RANGE = {
    True: DriverStatement(_replace_range(SUMMARY_MESSAGES)),
    False: DriverStatement(_replace_range(SUMMARY_PARENTS)),
}

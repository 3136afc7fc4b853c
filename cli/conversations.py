"""``lcm status`` and ``lcm dag``: one conversation's figures and its summary DAG."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime
from typing import Annotated

import typer
from rich.table import Table
from rich.tree import Tree
from sqlalchemy.orm import Session

from cli.common import (
    BudgetOpt,
    JsonOpt,
    KeyArg,
    SessionOpt,
    TenantOpt,
    in_session,
    out,
    session_key,
    tenant_id_for,
)
from lcm.conversations.dag_view import ConversationDag, MessageRange
from lcm.settings import get_settings
from lcm.status.service import ConversationStatus


def _optional_key(value: str | None) -> str | None:
    return None if value is None else session_key(value)


OptionalKeyArg = Annotated[
    str | None,
    typer.Argument(
        help="Session key; without one, the whole database's figures.", callback=_optional_key
    ),
]


def status_command(
    key: OptionalKeyArg = None,
    tenant: TenantOpt = "local",
    session_id: SessionOpt = None,
    token_budget: BudgetOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """A conversation's messages, summaries by depth, context tokens, debt and last run;
    without KEY, the database's: tenants, conversations, messages, summaries by depth,
    debt by status and the oldest pending debt's age.

    Exit codes: 0 ok, 1 not found, 2 usage.
    """
    if key is None:
        _database_status(as_json)
        return
    from lcm.conversations.service import resolve_for_read
    from lcm.status.service import conversation_status
    from lcm.tenants.service import effective_settings

    settings = get_settings()

    def read(session: Session) -> ConversationStatus:
        tenant_id = tenant_id_for(session, tenant)
        conversation = resolve_for_read(session, tenant_id, key, session_id)
        effective = effective_settings(session, tenant_id, settings)
        budget = token_budget or settings.default_token_budget
        return conversation_status(session, conversation, effective, budget)

    status = in_session(read)
    if as_json:
        out.print_json(json.dumps(asdict(status), default=str))
        return
    table = Table(show_header=False, title=f"{key} (conversation {status.conversation_id})")
    for name, value in asdict(status).items():
        table.add_row(name, "-" if value is None else str(value))
    out.print(table)


def _database_status(as_json: bool) -> None:
    from lcm.status import database_status

    status = in_session(database_status)
    if as_json:
        shown = asdict(status)
        shown["oldest_pending_debt_at"] = _iso(status.oldest_pending_debt_at)
        typer.echo(json.dumps(shown))
        return
    tenants = Table("tenant", "id", "conversations", "messages", title="tenants")
    for t in status.tenants:
        tenants.add_row(t.name, t.id, f"{t.conversations:,}", f"{t.messages:,}")
    out.print(tenants)
    table = Table(show_header=False, title="database")
    table.add_row("conversations", f"{status.conversations:,}")
    table.add_row("messages", f"{status.messages:,}")
    for depth, count in status.summaries.items():
        table.add_row(f"summaries at depth {depth}", f"{count:,}")
    for name, count in sorted(status.debt.items()):
        table.add_row(f"debt {name}", f"{count:,}")
    age = status.oldest_pending_debt_seconds
    table.add_row("oldest pending debt", "-" if age is None else f"{age:,.0f} s")
    out.print(table)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def dag_command(
    key: KeyArg,
    tenant: TenantOpt = "local",
    session_id: SessionOpt = None,
) -> None:
    """The conversation's context and summary DAG, as a tree."""
    from lcm.conversations.dag_view import load_dag
    from lcm.conversations.service import resolve_for_read

    def read(session: Session) -> tuple[int, ConversationDag]:
        tenant_id = tenant_id_for(session, tenant)
        conversation = resolve_for_read(session, tenant_id, key, session_id)
        return conversation.id, load_dag(session, conversation.id)

    conversation_id, dag = in_session(read)
    root = Tree(
        f"[bold]{key}[/bold] conversation {conversation_id}: {len(dag.context)} context rows"
    )
    for row in dag.context:
        if row.summary_id is not None:
            _add_summary(root, dag, row.summary_id, set())
        elif row.messages is not None:
            root.add(_messages_label(row.messages))
    out.print(root)


def _add_summary(parent: Tree, dag: ConversationDag, summary_id: str, seen: set[str]) -> None:
    node = dag.nodes.get(summary_id)
    if node is None or summary_id in seen:
        parent.add(f"[red]{summary_id} (missing or repeated)[/red]")
        return
    seen.add(summary_id)
    span = f"{node.earliest_at:%Y-%m-%d %H:%M}..{node.latest_at:%Y-%m-%d %H:%M}"
    branch = parent.add(
        f"[cyan]{node.id}[/cyan] {node.kind} depth {node.depth}: {node.token_count:,} tokens, "
        f"{node.descendant_count:,} messages below, {span}"
    )
    for source in node.sources:
        _add_summary(branch, dag, source, seen)
    if node.messages is not None:
        branch.add(_messages_label(node.messages))


def _messages_label(messages: MessageRange) -> str:
    return (
        f"[dim]messages #{messages.first_seq}..#{messages.last_seq} "
        f"({messages.count:,}, {messages.tokens:,} tokens)[/dim]"
    )

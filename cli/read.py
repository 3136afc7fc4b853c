"""``lcm messages``, ``lcm summaries`` and ``lcm summary show``: read-only views of
one conversation, a table on a terminal and ``--json`` for scripts.

Exit codes: 0 ok; 1 not found or refused (no such tenant, conversation or
summary; a cursor this command did not hand out); 2 usage.
"""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table
from rich.text import Text
from sqlalchemy.orm import Session

from cli.common import (
    JsonOpt,
    KeyArg,
    SessionOpt,
    TenantOpt,
    console,
    in_session,
    out,
    tenant_id_for,
)
from lcm.conversations import printable_session_key

if TYPE_CHECKING:
    from lcm.status import MessagePage, SummaryRow

EXIT_CODES = "Exit codes: 0 ok, 1 not found or refused, 2 usage."
summary_app = typer.Typer(help=f"One summary. {EXIT_CODES}", no_args_is_help=True)


class Role(StrEnum):
    user = "user"
    assistant = "assistant"
    tool = "tool"
    system = "system"


def messages_command(
    key: KeyArg,
    tenant: TenantOpt = "local",
    session_id: SessionOpt = None,
    tail: Annotated[int | None, typer.Option(min=1, help="Only the last N messages.")] = None,
    since: Annotated[
        datetime | None, typer.Option(help="Only messages at or after this time (ISO, UTC).")
    ] = None,
    role: Annotated[Role | None, typer.Option(help="Only messages of this role.")] = None,
    cursor: Annotated[
        str | None, typer.Option(help="Continue after the page that printed this cursor.")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Messages per page.")] = 100,
    as_json: JsonOpt = False,
) -> None:
    """A conversation's messages in seq order (the family's latest, or --session-id).

    A page ends with a cursor (`next_cursor` in JSON) to pass to --cursor for
    the next one. Exit codes: 0 ok, 1 not found or refused, 2 usage.
    """
    from lcm.conversations import resolve_for_read
    from lcm.settings import get_settings
    from lcm.status import MessageFilter, message_page
    from lcm.tenants import effective_settings

    if tail is not None and cursor is not None:
        raise typer.BadParameter("--tail and --cursor do not combine")
    wanted = MessageFilter(
        role=role.value if role else None, since=since, cursor=cursor, limit=limit, tail=tail
    )

    def read(session: Session) -> tuple[int, str, MessagePage]:
        tid = tenant_id_for(session, tenant)
        conversation = resolve_for_read(session, tid, key, session_id)
        mask = effective_settings(session, tid, get_settings()).masks_secrets("console")
        page = message_page(session, conversation.id, replace(wanted, mask_secrets=mask))
        return conversation.id, conversation.session_key, page

    conversation_id, session_key, page = in_session(read)
    _print_messages(conversation_id, printable_session_key(session_key), page, as_json)


def _print_messages(conversation_id: int, shown_key: str, page: MessagePage, as_json: bool) -> None:
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "conversation_id": conversation_id,
                    "session_key": shown_key,
                    "messages": [_jsonable(asdict(m)) for m in page.messages],
                    "next_cursor": page.next_cursor,
                }
            )
        )
        return
    table = Table(
        "seq", "role", "at", "tokens", "content", title=f"{shown_key} ({conversation_id})"
    )
    for m in page.messages:
        table.add_row(
            str(m.seq),
            m.role,
            f"{m.created_at:%Y-%m-%d %H:%M:%S}",
            str(m.token_count),
            _clip(m.content),
        )
    out.print(table)
    if page.next_cursor:
        console.print(
            f"more: lcm messages {shown_key} --cursor {page.next_cursor} "
            "(with the same --role, --since and --limit)",
            markup=False,
        )


def summaries_command(
    key: KeyArg,
    tenant: TenantOpt = "local",
    session_id: SessionOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """A conversation's summaries: id, kind, depth, tokens, time range, in context or not.

    Exit codes: 0 ok, 1 not found, 2 usage.
    """
    from lcm.conversations import resolve_for_read
    from lcm.status import conversation_summaries

    def read(session: Session) -> tuple[int, str, list[SummaryRow]]:
        conversation = resolve_for_read(session, tenant_id_for(session, tenant), key, session_id)
        return (
            conversation.id,
            conversation.session_key,
            conversation_summaries(session, conversation.id),
        )

    conversation_id, session_key, rows = in_session(read)
    shown_key = printable_session_key(session_key)
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "conversation_id": conversation_id,
                    "session_key": shown_key,
                    "summaries": [_jsonable(asdict(r)) for r in rows],
                }
            )
        )
        return
    table = Table(
        "id",
        "kind",
        "depth",
        "tokens",
        "messages below",
        "from",
        "to",
        "in context",
        title=f"{shown_key} ({conversation_id}): {len(rows)} summaries",
    )
    for r in rows:
        table.add_row(
            r.id,
            r.kind,
            str(r.depth),
            f"{r.token_count:,}",
            f"{r.descendant_count:,}",
            f"{r.earliest_at:%Y-%m-%d %H:%M}",
            f"{r.latest_at:%Y-%m-%d %H:%M}",
            "yes" if r.in_context else "no",
        )
    out.print(table)


@summary_app.command("show")
def summary_show(
    summary_id: Annotated[str, typer.Argument(help="Summary id (sum_…).")],
    tenant: TenantOpt = "local",
    as_json: JsonOpt = False,
) -> None:
    """One summary: its text, the messages or summaries it was made from, and the
    summaries condensed from it. Exit codes: 0 ok, 1 not found, 2 usage."""
    from lcm.retrieval import describe_summary

    found = in_session(lambda s: describe_summary(s, tenant_id_for(s, tenant), summary_id))
    shown = _jsonable(asdict(found))
    shown["session_key"] = printable_session_key(found.session_key or "")
    if as_json:
        typer.echo(json.dumps(shown))
        return
    table = Table(show_header=False, title=f"{found.id} ({found.kind}, depth {found.depth})")
    for name in ("conversation_id", "session_key", "token_count", "source_token_count",
                 "descendant_count", "earliest_at", "latest_at", "created_at", "model",
                 "escalation", "in_context", "rewritten_at", "rewrites", "file_ids"):  # fmt: skip
        table.add_row(name, Text(str(shown[name])))  # stored text: never rich markup
    sources = found.source_messages
    table.add_row(
        "source messages", f"#{sources.first_seq}..#{sources.last_seq} ({sources.message_count:,})"
    )
    table.add_row("made from (parents)", ", ".join(found.parents) or "-")
    table.add_row("condensed into (children)", ", ".join(found.children) or "-")
    out.print(table)
    out.print(found.content, markup=False)


def _clip(text: str, width: int = 200) -> Text:
    """A message's text on one line, at most ``width`` characters, never read as markup."""
    flat = " ".join(text.split())
    return Text(flat if len(flat) <= width else flat[: width - 1] + "…")


def _jsonable(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in row.items()}

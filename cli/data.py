"""``lcm conversation list|erase|export|import`` and ``lcm tenant erase``: a tenant's data."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer
from rich.table import Table
from sqlalchemy.orm import Session

from cli.common import (
    JsonOpt,
    KeyArg,
    SessionOpt,
    TenantOpt,
    console,
    open_services,
    out,
    tenant_id_for,
)
from cli.progress import progress_bar
from lcm.conversations.session_keys import printable_session_key
from lcm.db.engine import Database

if TYPE_CHECKING:
    from lcm.erasure.service import Erased
    from lcm.services import Services

conversation_app = typer.Typer(help="A tenant's conversations: list, erase, export, import.")

T = TypeVar("T")
YesOpt = Annotated[bool, typer.Option("--yes", help="Really erase (nothing is kept).")]
ConversationOpt = Annotated[int | None, typer.Option(help="A conversation id of the family.")]


def _in_transaction(database: Database, work: Callable[[Session], T]) -> T:
    with database.transaction() as session:
        return work(session)


def _target(
    session: Session, tenant_id: str, key: str, session_id: str | None, conversation_id: int | None
) -> int:
    from lcm.conversations.service import get_conversation, resolve_for_read
    from lcm.errors import NotFound

    if conversation_id is None:
        return resolve_for_read(session, tenant_id, key, session_id).id
    found = get_conversation(session, tenant_id, conversation_id)
    if found is None or found.session_key != key:
        raise NotFound(f"no conversation {conversation_id} under session key {key!r}")
    return found.id


@conversation_app.command("list")
def list_command(
    tenant: TenantOpt = "local",
    prefix: Annotated[str | None, typer.Option(help="Session key prefix.")] = None,
    archived: Annotated[
        bool | None, typer.Option("--archived/--live", help="Only archived, or only live.")
    ] = None,
    limit: Annotated[int, typer.Option(help="At most this many.")] = 200,
    as_json: JsonOpt = False,
) -> None:
    """The tenant's conversations, newest first."""
    from lcm.conversations.listing import list_conversations

    with open_services() as services, services.database.read_session() as session:
        page = list_conversations(
            session,
            tenant_id_for(session, tenant),
            limit=limit,
            key_prefix=prefix,
            archived=archived,
        )
    rows = [asdict(c) for c in page.conversations]
    if as_json:
        out.print_json(json.dumps(rows, default=str))
        return
    table = Table("id", "session key", "session id", "archived", "messages", "updated")
    for c in page.conversations:
        table.add_row(
            str(c.conversation_id),
            printable_session_key(c.session_key),
            c.session_id or "-",
            str(c.archived),
            str(c.messages),
            f"{c.updated_at:%Y-%m-%d %H:%M}",
        )
    out.print(table)


@conversation_app.command("erase")
def erase_command(
    key: KeyArg,
    tenant: TenantOpt = "local",
    session_id: SessionOpt = None,
    conversation_id: ConversationOpt = None,
    yes: YesOpt = False,
) -> None:
    """Erase a session family, or one conversation of it (--session-id, --conversation-id)."""
    from lcm.erasure.service import erase_conversation, erase_family, remove_released_blobs

    if not yes:
        console.print("[red]erasing cannot be undone: add --yes[/red]")
        raise typer.Exit(2)

    def erase(session: Session) -> Erased:
        tenant_id = tenant_id_for(session, tenant)
        if session_id is None and conversation_id is None:
            return erase_family(session, tenant_id, key)
        target = _target(session, tenant_id, key, session_id, conversation_id)
        return erase_conversation(session, tenant_id, target)

    with open_services() as services:
        database = services.database
        erased = _in_transaction(database, erase)
        remove_released_blobs(database.read_session, services.storage, erased)
    out.print(f"erased conversations {erased.conversation_ids} ({erased.rows} rows)")


@conversation_app.command("export")
def export_command(
    key: KeyArg,
    tenant: TenantOpt = "local",
    session_id: SessionOpt = None,
    conversation_id: ConversationOpt = None,
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="File (default stdout).")
    ] = None,
    with_secrets: Annotated[
        bool,
        typer.Option(
            "--with-secrets",
            help="Write detected secrets as stored (default: placeholders); recorded as a read "
            "by 'cli' (lcm secrets reads).",
        ),
    ] = False,
) -> None:
    """Write a conversation (default: the family's latest) as JSONL.

    Detected secrets are written as placeholders (``[secret:aws_key#1]``)
    unless ``--with-secrets``; importing such an export stores the placeholders.
    """
    from lcm.transfer.export import export_lines

    with (
        open_services() as services,
        services.database.snapshot_session() as session,
        # Lines printed on the same terminal would tear the bar: no bar then.
        progress_bar(
            "exporting messages", quiet=output is None and sys.stdout.isatty()
        ) as on_progress,
    ):
        tenant_id = tenant_id_for(session, tenant)
        target = _target(session, tenant_id, key, session_id, conversation_id)
        if with_secrets:
            _record_export(services, tenant_id, target)
        lines = export_lines(
            session, services.storage, tenant_id, target, on_progress, with_secrets=with_secrets
        )
        if output is None:
            sys.stdout.writelines(lines)
            return
        with output.open("w", encoding="utf-8") as file:
            file.writelines(lines)
    console.print(f"exported conversation {target} to {output}")


def _record_export(services: Services, tenant_id: str, conversation_id: int) -> None:
    """The audit row of an export with originals, by the local operator, before it is written."""
    from lcm.secret_access import Reader, record_export

    retention = services.settings.secrets_reads_retention_days
    with services.database.transaction() as session:
        record_export(session, Reader(tenant_id, None, retention), conversation_id)


@conversation_app.command("import")
def import_command(
    key: KeyArg,
    source: Annotated[Path, typer.Argument(help="A JSONL export.", exists=True, dir_okay=False)],
    tenant: TenantOpt = "local",
    session_id: SessionOpt = None,
) -> None:
    """Write an export into a new or empty conversation of KEY (session id: the export's)."""
    from lcm.retrieval.search_backlog import index_search_backlog
    from lcm.secrets.service import SecretScan
    from lcm.tenants import effective_settings
    from lcm.transfer.service import import_conversation, parse_export

    with open_services() as services:
        database = services.database
        with source.open(encoding="utf-8") as file:
            export = parse_export(file, max_message_chars=services.settings.max_message_chars)
        target_session = session_id if session_id is not None else export.conversation.session_id

        def scan(s: Session) -> SecretScan:
            # The tenant's own detection rules (custom patterns, allow-list) apply.
            return SecretScan.of(effective_settings(s, tenant_id_for(s, tenant), services.settings))

        imported = _in_transaction(
            database,
            lambda s: import_conversation(
                s,
                services.storage,
                tenant_id_for(s, tenant),
                key,
                target_session,
                export,
                secrets=scan(s),
            ),
        )
        # No worker here: index for search now, after the import committed (SQLite).
        index_search_backlog(database.transaction)
    out.print_json(json.dumps(asdict(imported)))


def tenant_erase_command(name: str, yes: YesOpt = False) -> None:
    """Erase a tenant: every conversation, file, setting and key."""
    from lcm.erasure.service import erase_tenant_named, remove_released_blobs

    if not yes:
        console.print(f"[red]erasing tenant {name!r} cannot be undone: add --yes[/red]")
        raise typer.Exit(2)
    with open_services() as services:
        database = services.database
        with progress_bar(f"erasing tenant {name}") as on_progress:
            erased = _in_transaction(database, lambda s: erase_tenant_named(s, name, on_progress))
        removed = remove_released_blobs(database.read_session, services.storage, erased)
    out.print(
        f"erased tenant {name}: {len(erased.conversation_ids)} conversations, "
        f"{erased.rows} rows, {removed} stored files"
    )


def register(app: typer.Typer, tenant_app: typer.Typer) -> None:
    app.add_typer(conversation_app, name="conversation")
    tenant_app.command("erase")(tenant_erase_command)

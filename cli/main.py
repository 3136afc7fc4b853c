"""The ``lcm`` command: run the service, its workers, and operate it."""

from __future__ import annotations

import json
import logging
from typing import Annotated

import typer
from rich.console import Console

from cli import data, transcripts
from cli.common import in_session
from lcm.settings import get_settings
from lcm.tenants.service import IssuedKey

app = typer.Typer(help="Lossless Context Management server.", no_args_is_help=True)
db_app = typer.Typer(help="Database schema migrations.", no_args_is_help=True)
tenant_app = typer.Typer(help="Tenants.", no_args_is_help=True)
key_app = typer.Typer(help="API keys.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(tenant_app, name="tenant")
app.add_typer(key_app, name="key")

console = Console(stderr=True)

Host = Annotated[str, typer.Option(help="Interface to bind.")]
Port = Annotated[int, typer.Option(help="TCP port.")]


@app.command()
def serve(
    host: Host = "127.0.0.1",
    port: Port = 8000,
    concurrency: Annotated[int | None, typer.Option(help="Worker threads.")] = None,
) -> None:
    """Embedded mode: API + in-process worker on SQLite; nothing else to run."""
    import uvicorn

    from api.app import create_app
    from cli.embedded import bootstrap_local_tenant, embedded_settings
    from lcm.db.engine import Database
    from lcm.db.migrate import upgrade
    from workers.embedded import EmbeddedWorker

    settings = embedded_settings(get_settings(), concurrency)
    logging.basicConfig(level=settings.log_level)
    upgrade(settings.database_url)
    database = Database(settings)
    bootstrap_local_tenant(database, console)
    if not settings.llm_available:
        console.print(
            "[yellow]No ANTHROPIC_API_KEY: summaries use the offline extractive "
            "summarizer.[/yellow]"
        )
    worker = EmbeddedWorker(settings, database)
    worker.start()
    console.print(
        f"lcm-server (embedded) on http://{host}:{port}  database: {settings.database_url}"
    )
    try:
        uvicorn.run(
            create_app(settings, database=database, broker_ping=lambda: True),
            host=host,
            port=port,
            log_level=settings.log_level.lower(),
        )
    finally:
        worker.stop()
        database.dispose()


@app.command()
def api(
    host: Host = "0.0.0.0",
    port: Port = 8000,
    processes: Annotated[int, typer.Option(help="Uvicorn worker processes.")] = 1,
) -> None:
    """Scaled mode: the HTTP API (run `lcm db upgrade` first)."""
    import uvicorn

    uvicorn.run(
        "api.app:create_app",
        factory=True,
        host=host,
        port=port,
        workers=processes,
        log_level=get_settings().log_level.lower(),
    )


@app.command()
def worker(
    concurrency: Annotated[int | None, typer.Option(help="Threads in the pool.")] = None,
    queues: Annotated[str, typer.Option(help="Comma-separated queues.")] = (
        "compaction,files,expansion"
    ),
    hostname: Annotated[str | None, typer.Option(help="Celery node name.")] = None,
) -> None:
    """Scaled mode: a Celery worker process (thread pool: work waits on the LLM)."""
    from workers.celery_app import app as celery_app

    settings = get_settings()
    argv = [
        "worker",
        "--pool=threads",
        f"--concurrency={concurrency or settings.worker_concurrency}",
        f"--queues={queues}",
        f"--loglevel={settings.log_level}",
        "--task-events",
    ]
    if hostname:
        argv.append(f"--hostname={hostname}")
    celery_app.worker_main(argv)


@app.command()
def beat() -> None:
    """Scaled mode: the Celery beat scheduler (run exactly one)."""
    from workers.celery_app import app as celery_app

    celery_app.start(["beat", f"--loglevel={get_settings().log_level}"])


@app.command()
def flower(port: Port = 5555) -> None:
    """Flower, the Celery monitoring UI."""
    from workers.celery_app import app as celery_app

    celery_app.start(["flower", f"--port={port}"])


@app.command()
def mcp(
    transport: Annotated[str, typer.Option(help="stdio or http (streamable HTTP).")] = "stdio",
    host: Host = "127.0.0.1",
    port: Port = 8765,
    api_url: Annotated[str | None, typer.Option(help="lcm-server URL.")] = None,
    session_key: Annotated[str | None, typer.Option(help="Default session family.")] = None,
) -> None:
    """MCP server with lcm_grep, lcm_describe, lcm_expand_query for one tenant key.

    The key comes from LCM_MCP_API_KEY (not an option: it would show in `ps`).
    """
    from cli.mcp_server import LcmApi, build_server

    settings = get_settings()
    if settings.mcp_api_key is None or transport not in ("stdio", "http"):
        console.print("[red]set LCM_MCP_API_KEY; --transport is stdio or http[/red]")
        raise typer.Exit(2)
    api = LcmApi(
        api_url or settings.mcp_api_url,
        settings.mcp_api_key.get_secret_value(),
        expand_query_timeout=settings.expand_query_timeout_seconds + 30,
    )
    server = build_server(api, session_key or settings.mcp_session_key)
    if transport == "stdio":
        server.run("stdio")  # stdout carries the protocol: nothing else may print there
    else:
        server.run("streamable-http", host=host, port=port)


@db_app.command("upgrade")
def db_upgrade(revision: str = "head") -> None:
    """Apply migrations up to ``revision``."""
    from lcm.db.migrate import current_revision, upgrade

    settings = get_settings()
    upgrade(settings.database_url, revision)
    console.print(f"database at revision {current_revision(settings.database_url)}")


@db_app.command("current")
def db_current() -> None:
    """Print the database's migration revision."""
    from lcm.db.migrate import current_revision

    typer.echo(current_revision(get_settings().database_url) or "(empty)")


@tenant_app.command("create")
def tenant_create(
    name: str, as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False
) -> None:
    """Create a tenant and print its API key (shown once, stored only as a hash)."""
    from lcm.tenants.service import create_tenant

    _print_key(in_session(lambda s: create_tenant(s, name)), as_json)


@key_app.command("create")
def key_create(
    tenant: str, as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False
) -> None:
    """Issue another API key for an existing tenant."""
    from lcm.tenants.service import issue_key_for

    _print_key(in_session(lambda s: issue_key_for(s, tenant)), as_json)


def _print_key(issued: IssuedKey, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps({"tenant_id": issued.tenant_id, "api_key": issued.api_key}))
    else:
        typer.echo(f"tenant {issued.tenant_name} ({issued.tenant_id})\napi key: {issued.api_key}")


transcripts.register(app)  # import, status, dag
data.register(app, tenant_app)  # conversation list/erase/export/import, tenant erase

if __name__ == "__main__":
    app()

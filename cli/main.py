"""The ``lcm`` command: run the service, its workers, and operate it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from cli import data, transcripts
from cli.backup import backup, restore
from cli.config import config_app
from cli.debt import debt_app
from cli.doctor import doctor
from cli.doctor_clean import doctor_clean
from cli.read import messages_command, summaries_command, summary_app
from cli.secrets_access import secrets_app
from cli.semantic import reindex
from cli.surgery import summary_dissolve, summary_operation, summary_rewrite
from cli.tenants import key_app, tenant_app
from lcm.logs import access_logged, configure_logging
from lcm.settings import get_settings

if TYPE_CHECKING:
    from fastapi import FastAPI

app = typer.Typer(help="Lossless Context Management server.", no_args_is_help=True)
db_app = typer.Typer(help="Database schema migrations.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(tenant_app, name="tenant")
app.add_typer(key_app, name="key")
app.add_typer(debt_app, name="debt")
app.add_typer(config_app, name="config")
app.add_typer(summary_app, name="summary")
app.add_typer(secrets_app, name="secrets")
summary_app.command("rewrite")(summary_rewrite)
summary_app.command("dissolve")(summary_dissolve)
summary_app.command("operation")(summary_operation)
app.command("messages")(messages_command)
app.command("summaries")(summaries_command)
app.command("doctor")(doctor)
app.command("reindex")(reindex)
app.command("doctor-clean")(doctor_clean)
app.command("backup")(backup)
app.command("restore")(restore)

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
    from lcm.db.migrate import upgrade
    from lcm.heap import collect_less_often
    from lcm.services import Services
    from workers.embedded import EmbeddedWorker
    from workers.link import CeleryLink

    settings = embedded_settings(get_settings(), concurrency)
    configure_logging(settings.log_level, settings.log_format)
    upgrade(settings.database_url)
    # One set of services for the API and the in-process worker: one engine,
    # one LLM client and one breaker per model in this process.
    services = Services.build(settings)
    bootstrap_local_tenant(services.database, console)
    if not settings.llm_available:
        console.print(
            "[yellow]No ANTHROPIC_API_KEY nor LCM_OPENAI_API_KEY/LCM_OPENAI_BASE_URL: "
            "summaries use the offline extractive summarizer.[/yellow]"
        )
    collect_less_often()
    worker = EmbeddedWorker(services)
    worker.start()
    console.print(
        f"lcm-server (embedded) on http://{host}:{port}  database: {settings.database_url}"
    )
    try:
        uvicorn.run(
            create_app(services=services, link=CeleryLink(), broker_ping=lambda: True),
            host=host,
            port=port,
            log_level=settings.log_level.lower(),
            log_config=None,  # the lines go through lcm.logs (LCM_LOG_FORMAT)
            access_log=access_logged(settings.log_level),
        )
    finally:
        worker.stop()
        services.close()


@app.command()
def api(
    host: Host = "0.0.0.0",
    port: Port = 8000,
    processes: Annotated[int, typer.Option(help="Uvicorn worker processes.")] = 1,
) -> None:
    """Scaled mode: the HTTP API (run `lcm db upgrade` first)."""
    import uvicorn

    uvicorn.run(
        "cli.main:scaled_app",
        factory=True,
        host=host,
        port=port,
        workers=processes,
        log_level=get_settings().log_level.lower(),
        log_config=None,  # create_app configures lcm.logs in each process
        access_log=access_logged(get_settings().log_level),
    )


def scaled_app() -> FastAPI:
    """The scaled API process's app (uvicorn's factory): the API wired to Celery workers."""
    from api.app import create_app
    from workers.bootstrap import bootstrap
    from workers.link import CeleryLink

    # This process sends jobs and waits for answers; it runs none.
    bootstrap(get_settings())
    return create_app(link=CeleryLink())


@app.command()
def worker(
    concurrency: Annotated[int | None, typer.Option(help="Threads in the pool.")] = None,
    queues: Annotated[str, typer.Option(help="Comma-separated queues.")] = (
        "compaction,files,expansion"
    ),
    hostname: Annotated[str | None, typer.Option(help="Celery node name.")] = None,
) -> None:
    """Scaled mode: a Celery worker process (thread pool: work waits on the LLM)."""
    from workers.bootstrap import bootstrap

    settings = get_settings()
    celery_app = bootstrap(settings)
    argv = [
        "worker",
        "--pool=threads",
        f"--concurrency={concurrency or settings.worker_concurrency}",
        f"--queues={queues}",
        f"--loglevel={settings.log_level}",
        # No --task-events: it would send task events with no monitor
        # listening (workers.celery_app.EVENTS); Flower switches them on.
    ]
    if hostname:
        argv.append(f"--hostname={hostname}")
    celery_app.worker_main(argv)


@app.command()
def beat() -> None:
    """Scaled mode: the Celery beat scheduler (run exactly one)."""
    from workers.bootstrap import bootstrap

    settings = get_settings()
    bootstrap(settings).start(["beat", f"--loglevel={settings.log_level}"])


@app.command()
def flower(
    host: Host = "0.0.0.0",
    port: Port = 5555,
    no_auth: Annotated[
        bool, typer.Option("--no-auth", help="Run without basic auth (a trusted network only).")
    ] = False,
) -> None:
    """Flower, the Celery monitoring UI, behind basic auth from LCM_FLOWER_BASIC_AUTH."""
    import os

    from workers.bootstrap import bootstrap

    auth = get_settings().flower_basic_auth
    if auth is None and not no_auth:
        console.print(
            "[red]set LCM_FLOWER_BASIC_AUTH=user:password (or pass --no-auth on a "
            "trusted network): Flower shows every worker and task and can revoke tasks[/red]"
        )
        raise typer.Exit(2)
    if auth is not None:
        # Flower reads FLOWER_* variables itself; passing the password this way
        # keeps it out of the process list, where --basic-auth would show it.
        os.environ["FLOWER_BASIC_AUTH"] = auth.get_secret_value()
    bootstrap(get_settings()).start(["flower", f"--address={host}", f"--port={port}"])


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
    from cli.mcp_server import build_server
    from lcm_client import AsyncLcmClient

    settings = get_settings()
    if settings.mcp_api_key is None or transport not in ("stdio", "http"):
        console.print("[red]set LCM_MCP_API_KEY; --transport is stdio or http[/red]")
        raise typer.Exit(2)
    api = AsyncLcmClient(
        api_url or settings.mcp_api_url,
        settings.mcp_api_key.get_secret_value(),
        compact_wait_seconds=settings.compact_wait_seconds,
        expand_query_seconds=settings.expand_query_timeout_seconds,
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


transcripts.register(app)  # import, status, dag
data.register(app, tenant_app)  # conversation list/erase/export/import, tenant erase

if __name__ == "__main__":
    app()

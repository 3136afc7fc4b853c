"""``lcm reindex``: embed every text still without a vector of the current model, now.

The same leased backfill beat runs every ``LCM_SEMANTIC_BACKFILL_INTERVAL_SECONDS``
(``lcm.semantic.backfill``), run in this process with a progress bar: after a
model change it deletes the old model's vectors and embeds everything again.
Exit codes: 0 done; 1 refused (semantic off, the extra missing, or another
backfill holds the lease); 2 usage.
"""

from __future__ import annotations

from typing import Annotated

import typer

from cli.common import console, out, require_schema
from cli.progress import progress_bar
from lcm.db.engine import Database
from lcm.errors import LcmError
from lcm.settings import get_settings


def reindex(
    batch: Annotated[
        int | None, typer.Option(min=1, help="Texts per transaction (LCM_SEMANTIC_BATCH).")
    ] = None,
) -> None:
    """Embed every message and summary without a vector of the current model (leased)."""
    from lcm.semantic import load_embedder, run_backfill

    settings = get_settings()
    if not settings.semantic:
        console.print("[red]semantic recall is off: set LCM_SEMANTIC=on first[/red]")
        raise typer.Exit(1)
    require_schema(settings)
    database = Database(settings)
    try:
        embedder = load_embedder()
        with progress_bar(f"embedding with {embedder.model_name}") as on_progress:
            result = run_backfill(
                database.transaction,
                embedder,
                batch or settings.semantic_batch,
                settings.semantic_lease_seconds,
                on_progress,
            )
    except LcmError as exc:
        console.print(f"[red]{exc.message}[/red]")
        raise typer.Exit(1) from exc
    finally:
        database.dispose()
    if result is None:
        console.print("[red]another backfill or reindex holds the lease; try again later[/red]")
        raise typer.Exit(1)
    out.print(f"embedded {result.embedded} texts, deleted {result.deleted} old vectors")

"""Semantic tasks: embed a conversation's new texts after commit; beat's backfill.

Both take ids only, reload what they need and are safe to run twice: a text
is embedded only where it has no vector of the current model yet.
"""

from __future__ import annotations

from lcm.job_types import EMBED_CONVERSATION, SEMANTIC_BACKFILL
from lcm.semantic.backfill import embed_conversation, run_backfill
from lcm.semantic.embedder import load_embedder
from workers import runtime
from workers.celery_app import app


@app.task(name=EMBED_CONVERSATION.name)
def embed(conversation_id: int) -> int:
    """Embed the conversation's messages and summaries without a vector; how many."""
    settings = runtime.settings()
    if not settings.semantic:
        return 0
    return embed_conversation(
        runtime.database().transaction,
        load_embedder(),
        conversation_id,
        settings.semantic_batch,
        settings.semantic_lease_seconds,
    )


@app.task(name=SEMANTIC_BACKFILL.name)
def backfill() -> int:
    """Beat: embed what lost jobs, crashes or a model change left; -1 when one already runs."""
    settings = runtime.settings()
    if not settings.semantic:
        return 0
    result = run_backfill(
        runtime.database().transaction,
        load_embedder(),
        settings.semantic_batch,
        settings.semantic_lease_seconds,
    )
    return -1 if result is None else result.embedded

"""Building conversations and summary DAGs for the retrieval tests."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from lcm.content import IncomingMessage
from lcm.db.engine import Database
from lcm.ingest.service import ingest_messages, prepare_batch
from lcm.retrieval.search_backlog import index_search_backlog
from lcm.settings import CompactionSettings
from tests.helpers import compact as compact_chain

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def ingest(
    db: Database,
    tenant_id: str,
    key: str,
    contents: Sequence[str | list[Any]],
    *,
    start: datetime = T0,
    step: timedelta = timedelta(minutes=1),
    session_id: str | None = None,
    roles: Sequence[str] | None = None,
    index: bool = True,
) -> int:
    """Append messages (alternating user/assistant) one ``step`` apart; the conversation id.

    ``index``: then index them for search as the job the ingest asks for
    would (SQLite; ``False`` leaves them in the search backlog).
    """
    messages = [
        IncomingMessage(
            roles[i] if roles else ("user" if i % 2 == 0 else "assistant"),
            content,
            None,
            (start + step * i).isoformat(),
        )
        for i, content in enumerate(contents)
    ]
    with db.transaction() as session:
        batch = prepare_batch(messages, max_batch=10_000, max_chars=10**7)
        conversation_id = ingest_messages(
            session, tenant_id, key, session_id, batch
        ).conversation_id
    if index:
        index_search_backlog(db.transaction)
    return conversation_id


def compact(db: Database, tenant_id: str, conversation_id: int, *, fresh_tail: int = 4) -> None:
    """Leaf passes and one level of condensation with the offline summarizer."""
    settings = CompactionSettings(
        fresh_tail_count=fresh_tail,
        leaf_min_fanout=4,
        leaf_chunk_tokens=256,
        condensed_min_fanout=2,
        sweep_max_depth=1,
        summary_prefix_target_tokens=50,
    )
    compact_chain(db, tenant_id, conversation_id, settings, token_budget=10_000_000)

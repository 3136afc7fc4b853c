"""Index SQLite's new messages for search after their ingest commits, a short transaction at a time.

On SQLite one write lock serves every tenant, and FTS5 + trigram indexing
was most of the time a big ``/messages`` batch held it (a 1,000 x 15 KB
batch: ~4.7 s). The batch must stay one transaction (never half written),
so its messages are indexed *after* it commits: the insert trigger only
records their ids in ``search_backlog`` (migration 0010), and
:func:`index_search_backlog` moves the backlog into the indexes in chunks of
at most :data:`CHUNK_MESSAGES` messages / :data:`CHUNK_TOKENS` tokens, each
its own write transaction. Between chunks the write gate
(``lcm.db.write_gate``) lets writers that queued meanwhile go first, so
another tenant's write waits at most about one chunk. Until a message is
indexed grep reads it from the backlog with plain predicates
(``lcm.retrieval.search_repository``): a committed message is always found.

Who drains: every unit of work that inserts messages asks for an
:class:`~lcm.outbox.IndexSearchBacklog` job (:func:`request_indexing`), sent
only after it commits; in embedded mode the in-process worker runs it, so
the request that wrote the batch answers without waiting for its indexing.
(An outbox job rather than a hook in ``Database``'s after-commit: the engine
stays free of domain code, a rolled-back batch asks for nothing, and the
indexing runs on a worker thread instead of delaying the response.)
Beat runs the same job periodically on SQLite (and embedded mode's beat at
start), which indexes what a crash or a lost job left behind; the ``lcm
import`` commands, which run no worker, drain after their own commits.
Draining is idempotent and safe to run concurrently.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from lcm.db.engine import Transaction
from lcm.outbox import IndexSearchBacklog, request_job
from lcm.retrieval.search_backlog_repository import SearchBacklogRepository

# One chunk (at most ~250 KB of text) indexes in ~0.1 s, ~0.25 s on a loaded
# 2-core machine: about the longest another writer waits behind a drain.
# Smaller chunks would wait less but leave FTS5 more segments to merge.
CHUNK_MESSAGES = 100
CHUNK_TOKENS = 64_000


def request_indexing(session: Session) -> None:
    """Index what this unit of work inserted once it commits (SQLite; no-op on Postgres)."""
    if SearchBacklogRepository(session).in_use:
        request_job(session, IndexSearchBacklog())


def index_search_backlog(
    transaction: Transaction,
    *,
    chunk_messages: int = CHUNK_MESSAGES,
    chunk_tokens: int = CHUNK_TOKENS,
) -> int:
    """Index every backlog row, one chunk per write transaction; how many were indexed.

    Runs until the backlog is empty, including rows committed while it runs.
    A drain that finds an empty backlog (another drain took it) returns 0.
    """
    indexed = 0
    while True:
        with transaction() as session:
            repo = SearchBacklogRepository(session)
            if not repo.in_use:
                return 0
            chunk = repo.index_chunk(chunk_messages, chunk_tokens)
        indexed += chunk.messages
        if not chunk.more:
            return indexed

"""Every job the workers run, declared once: its task name, its queue, its beat schedule.

The domain asks for jobs through the outbox (``lcm/outbox.py``) with the
job kinds declared here (the payload: ids only), each naming its
:class:`JobType`; the sender (``workers/sender.py``) sends
to the type's name and queue; each task takes its name from its type
(``@app.task(name=LEAF.name)``); Celery's includes and routes
(``workers/celery_app.py``) and beat's schedule (:data:`BEAT`) are built
from :data:`JOB_TYPES`. Adding a job is a line here and its task; nothing
here imports Celery, so the domain can name a job without it.

A task lives in ``workers/tasks/<group>.py``, where the group is its name's
first part (``files.summarize`` in ``workers/tasks/files.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from lcm.settings import Settings

QUEUES = ("compaction", "files", "expansion")


@dataclass(frozen=True, slots=True)
class JobType:
    """A kind of job: the Celery task that runs it and the queue it waits on."""

    name: str
    queue: str
    awaited: bool = False
    """A request waits for its result (the worker announces it when stored)."""

    @property
    def group(self) -> str:
        """The name's first part: its task module is ``workers/tasks/<group>.py``."""
        return self.name.split(".", 1)[0]


# A sweep's passes: a leaf job without a token is also the wake-up that claims debt.
LEAF = JobType("compaction.leaf", "compaction")
CONDENSE = JobType("compaction.condense", "compaction")
REPAIR = JobType("compaction.repair", "compaction")
# An operator's summary surgery (rewrite, dissolve): a pass of the same chain.
SURGERY = JobType("compaction.surgery", "compaction")
COMPACTION_RECONCILE = JobType("compaction.reconcile", "compaction")
SUMMARIZE_FILE = JobType("files.summarize", "files")
FILES_RECONCILE = JobType("files.reconcile", "files")
EXPAND_QUERY = JobType("expansion.query", "expansion", awaited=True)
SWEEP_GRANTS = JobType("expansion.sweep_grants", "expansion")
# Housekeeping shares the compaction queue: it is rare and short.
RETENTION_SWEEP = JobType("retention.sweep", "compaction")
INDEX_SEARCH_BACKLOG = JobType("search.index_backlog", "compaction")
# Semantic recall (LCM_SEMANTIC=on): CPU-bound embedding, on the files queue
# so a long backfill never holds compaction's workers.
EMBED_CONVERSATION = JobType("semantic.embed", "files")
SEMANTIC_BACKFILL = JobType("semantic.backfill", "files")
PING = JobType("system.ping", "compaction")

JOB_TYPES = (
    LEAF,
    CONDENSE,
    REPAIR,
    SURGERY,
    COMPACTION_RECONCILE,
    SUMMARIZE_FILE,
    FILES_RECONCILE,
    EXPAND_QUERY,
    SWEEP_GRANTS,
    RETENTION_SWEEP,
    INDEX_SEARCH_BACKLOG,
    EMBED_CONVERSATION,
    SEMANTIC_BACKFILL,
    PING,
)

# The pass job for each kind of pass a sweep hands the lease to.
PASS_JOBS = {"leaf": LEAF, "condensed": CONDENSE, "repair": REPAIR, "surgery": SURGERY}


# The jobs the domain asks for through the outbox: the payload (ids only, the
# worker reloads the rest) and the type it is sent as.


@dataclass(frozen=True, slots=True)
class WakeCompaction:
    """Claim the conversation's compaction debt and run its first pass."""

    conversation_id: int

    # A leaf job without a token is the wake-up (workers/tasks/compaction.py).
    job_type: ClassVar[JobType] = LEAF

    def args(self) -> list[object]:
        return [self.conversation_id]


@dataclass(frozen=True, slots=True)
class SummarizeFile:
    """Write a large file's exploration summary."""

    file_id: str

    job_type: ClassVar[JobType] = SUMMARIZE_FILE

    def args(self) -> list[object]:
        return [self.file_id]


@dataclass(frozen=True, slots=True)
class IndexSearchBacklog:
    """Index the messages SQLite has committed but not yet indexed for search.

    No ids: the job drains the whole backlog (``lcm.retrieval.search_backlog``),
    so any number of requests for it are one job's worth of work.
    """

    job_type: ClassVar[JobType] = INDEX_SEARCH_BACKLOG

    def args(self) -> list[object]:
        return []


@dataclass(frozen=True, slots=True)
class EmbedConversation:
    """Embed the conversation's messages and summaries that have no vector yet."""

    conversation_id: int

    job_type: ClassVar[JobType] = EMBED_CONVERSATION

    def args(self) -> list[object]:
        return [self.conversation_id]


Job = WakeCompaction | SummarizeFile | IndexSearchBacklog | EmbedConversation


def _always(_settings: Settings) -> bool:
    return True


@dataclass(frozen=True, slots=True)
class Periodic:
    """A job beat sends every ``every(settings)`` seconds (where ``when(settings)``)."""

    entry: str
    job: JobType
    every: Callable[[Settings], float]
    when: Callable[[Settings], bool] = _always


BEAT = (
    Periodic("compaction-reconcile", COMPACTION_RECONCILE, lambda s: s.reconcile_interval_seconds),
    Periodic("files-reconcile", FILES_RECONCILE, lambda s: s.files_reconcile_interval_seconds),
    Periodic("expansion-sweep-grants", SWEEP_GRANTS, lambda s: s.expansion_sweep_interval_seconds),
    Periodic("retention-sweep", RETENTION_SWEEP, lambda s: s.retention_sweep_interval_seconds),
    # Postgres indexes on the write path; SQLite indexes after commit and
    # this catches what a lost job or a crash left (lcm.retrieval.search_backlog).
    Periodic(
        "search-index-backlog",
        INDEX_SEARCH_BACKLOG,
        lambda s: s.search_backlog_interval_seconds,
        when=lambda s: s.is_sqlite,
    ),
    # What a lost embed job, a crash or a model change left (lcm.semantic.backfill).
    Periodic(
        "semantic-backfill",
        SEMANTIC_BACKFILL,
        lambda s: s.semantic_backfill_interval_seconds,
        when=lambda s: s.semantic,
    ),
)

"""The composition root's product: what a process builds once and hands down.

Every process kind (the API, a worker, ``lcm serve``, the CLI) calls
:meth:`Services.build` exactly once and passes the result, or parts of it,
to the code it runs; nothing below builds a database engine, an LLM client
or a file store of its own. What a tenant may override (models, fallbacks,
truncation, expand caps, custom instructions, large-file threshold) is not
fixed here: it is read from the tenant's effective settings and passed per
call.

Which process builds it where:

- API (``lcm api``): :func:`api.app.create_app`;
- worker (``lcm worker``): :func:`workers.runtime.services`, after the fork;
- embedded (``lcm serve``): ``cli.main.serve`` builds one and shares it
  between the API and the in-process worker;
- CLI commands: :func:`cli.common.open_services` (``lcm import``, the data
  commands) or, for those that need the database only, ``cli.common.in_session``;
- the MCP server talks to the API over HTTP and builds none of this.
"""

from __future__ import annotations

import os
import socket
import threading

from lcm.compaction.engine import CompactionEngine
from lcm.compaction.jobs import CompactionJobs
from lcm.db.engine import Database
from lcm.files.storage import FileStorage, build_storage
from lcm.outbox import JobSender
from lcm.settings import Settings
from lcm.summarize.connections import LlmConnections
from lcm.summarize.llm import LlmClients
from lcm.summarize.summarizer import Summarizer
from lcm.turns import TurnGate


class Services:
    """The process's shared parts. Thread-safe: request and pool threads share one.

    The database engine and the file store are made at once; the LLM side
    (SDK client, per-model breakers, summarizer) on first use, under a lock,
    so commands and processes that never summarize do not pay for the SDK
    import, and pool threads racing to first use still share one client.
    """

    def __init__(self, settings: Settings, database: Database, storage: FileStorage) -> None:
        self.settings = settings
        self.database = database
        self.storage = storage
        # The worker's passes take turns at their work outside the model call
        # (lcm/turns.py); a thread that takes no turn is not gated.
        self.turns = TurnGate(settings.worker_pass_slots)
        self._lock = threading.Lock()
        self._llm: tuple[LlmConnections, Summarizer] | None = None
        self._jobs: dict[str, CompactionJobs] = {}

    @classmethod
    def build(
        cls,
        settings: Settings,
        *,
        database: Database | None = None,
        sender: JobSender | None = None,
    ) -> Services:
        """Build everything once. ``database`` is reused when given (tests, embedded)."""
        database = database or Database(settings)
        if sender is not None:
            database.sender = sender
        return cls(settings, database, build_storage(settings))

    @property
    def llm(self) -> LlmClients | None:
        """The shared Anthropic connection; ``None`` without an Anthropic key."""
        return self._llm_side()[0].anthropic

    @property
    def llms(self) -> LlmConnections:
        """Every configured provider's shared connection (none offline: extractive summaries)."""
        return self._llm_side()[0]

    @property
    def summarizer(self) -> Summarizer:
        return self._llm_side()[1]

    def _llm_side(self) -> tuple[LlmConnections, Summarizer]:
        with self._lock:
            if self._llm is None:
                llm = LlmConnections.from_settings(self.settings, self.turns)
                self._llm = (llm, Summarizer.from_settings(self.settings, llm))
            return self._llm

    def compaction_jobs(self, role: str = "worker") -> CompactionJobs:
        """The job runner for ``role`` ("worker" or "api" for inline mode), made once.

        One per role so leases name who holds them; all share one summarizer
        and so one set of breakers.
        """
        summarizer = self.summarizer  # outside the lock below: it takes the same lock
        with self._lock:
            jobs = self._jobs.get(role)
            if jobs is None:
                jobs = CompactionJobs(
                    self.database.transaction,
                    CompactionEngine(
                        self.database.transaction, summarizer, reads=self.database.lookup_session
                    ),
                    self.settings,
                    owner=f"{role}:{socket.gethostname()}:{os.getpid()}",
                )
                self._jobs[role] = jobs
            return jobs

    def close(self) -> None:
        self.database.dispose()

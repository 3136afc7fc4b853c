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
- CLI commands: :func:`cli.common.open_services`;
- the MCP server talks to the API over HTTP and builds none of this.
"""

from __future__ import annotations

import os
import socket
import threading
from dataclasses import dataclass, field

from lcm.compaction.engine import CompactionEngine
from lcm.compaction.jobs import CompactionJobs
from lcm.db.engine import Database
from lcm.files.extraction import LargeFileExtractor
from lcm.files.storage import FileStorage, build_storage
from lcm.outbox import JobSender
from lcm.settings import CompactionSettings, Settings
from lcm.summarize.llm import LlmClients
from lcm.summarize.summarizer import Summarizer


@dataclass
class Services:
    """The process's shared parts. Thread-safe: request and pool threads share one."""

    settings: Settings
    database: Database
    llm: LlmClients | None  # None offline (no API key): extractive summaries
    summarizer: Summarizer
    storage: FileStorage
    _jobs: dict[str, CompactionJobs] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

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
        llm = LlmClients.from_settings(settings)
        return cls(
            settings=settings,
            database=database,
            llm=llm,
            summarizer=Summarizer.from_settings(settings, llm),
            storage=build_storage(settings),
        )

    def large_files(self, effective: CompactionSettings) -> LargeFileExtractor:
        """The large-file extractor at the tenant's threshold, over the shared storage."""
        return LargeFileExtractor(self.storage, effective.large_file_token_threshold)

    def compaction_jobs(self, role: str = "worker") -> CompactionJobs:
        """The job runner for ``role`` ("worker" or "api" for inline mode), made once.

        One per role so leases name who holds them; all share one summarizer
        and so one set of breakers.
        """
        with self._lock:
            jobs = self._jobs.get(role)
            if jobs is None:
                jobs = CompactionJobs(
                    self.database.transaction,
                    CompactionEngine(self.database.transaction, self.summarizer),
                    self.settings,
                    owner=f"{role}:{socket.gethostname()}:{os.getpid()}",
                )
                self._jobs[role] = jobs
            return jobs

    def close(self) -> None:
        self.database.dispose()

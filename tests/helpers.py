"""Helpers the integration tests share: compaction through the production chain."""

from __future__ import annotations

from lcm.compaction.engine import CompactionEngine
from lcm.compaction.inline import SweepReport, compact_now
from lcm.compaction.jobs import CompactionJobs
from lcm.compaction.planning import PassPlan
from lcm.compaction.sweep import next_pass
from lcm.db.engine import Database
from lcm.settings import CompactionSettings
from lcm.summarize.extractive import ExtractiveProvider
from lcm.summarize.summarizer import Summarizer


def next_plan(
    engine: CompactionEngine,
    conversation_id: int,
    settings: CompactionSettings,
    token_budget: int,
) -> PassPlan | None:
    """The pass a sweep would run next over the committed context."""
    return next_pass(engine.load(conversation_id), settings, token_budget)


def compact(
    db: Database,
    tenant_id: str,
    conversation_id: int,
    settings: CompactionSettings,
    token_budget: int,
    *,
    summarizer: Summarizer | None = None,
    target_tokens: int | None = None,
) -> SweepReport:
    """Owe manual compaction and run its whole chain here, as ``lcm import --compact`` does.

    The jobs are the worker's own (debt row, lease, fencing, one pass per
    job); ``settings`` replace the deployment's compaction settings.
    """
    deployment = db.settings.model_copy(
        update={name: getattr(settings, name) for name in CompactionSettings.model_fields}
    )
    engine = CompactionEngine(
        db.transaction, summarizer or Summarizer(ExtractiveProvider()), reads=db.lookup_session
    )
    jobs = CompactionJobs(db.transaction, engine, deployment, owner="test")
    report = compact_now(jobs, tenant_id, conversation_id, token_budget, target_tokens)
    assert report is not None, "nothing else holds the lease in a test"
    return report

"""Re-scanning stored history for secrets: a leased job, in batches, resumable.

After a detector upgrade (``DETECTOR_VERSION``) or a change of a tenant's
patterns or allow-list, spans written earlier are stale: ``start_scan``
records a scan of the tenant (or one conversation) and asks for a
``secrets.scan`` job; the worker runs it in slices of batches.

- **One scan per scope.** ``secret_scans.active_scope`` is unique per
  tenant while a scan is pending or running: a second request for the same
  scope, however concurrent, conflicts on it (409 ``secret_scan_running``).
- **The lease.** A slice claims the scan with a conditional UPDATE that
  bumps ``fencing_token``; every batch re-reads the row under its lock with
  that token and writes nothing if a newer claim replaced it, so a worker
  that stalled past its lease cannot write beside the one that took over.
- **Resumable.** Each batch commits its spans with the cursor (conversation
  and last message id): a crash loses at most the batch it was in. A lost
  lease expires and beat's ``secrets.scan_reconcile`` sends the scan again.
- **Idempotent.** A batch replaces its messages' spans with what the
  detector finds now; a value still found keeps its ordinal
  (:func:`lcm.secrets.service.rescan_messages`), so a batch run twice writes
  the same rows and placeholders in summaries written earlier stay right.
- **Which conversations.** Those never scanned, or last scanned under
  another detector version with other rules (``secret_scan_marks``); with
  ``rescan_all``, every one in scope. Large files are not re-scanned.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from lcm.db.models import SecretScanRun, utcnow
from lcm.errors import NotFound, SecretScanBusy
from lcm.job_types import ScanSecrets
from lcm.outbox import request_job
from lcm.secrets.repository import SecretSpanRepository
from lcm.secrets.rules import DetectionRules
from lcm.secrets.scan_repository import SecretScanRepository
from lcm.secrets.service import SCANNED_PARTS, ScannedText, SecretScan, rescan_messages
from lcm.settings import Settings
from lcm.tenants import effective_settings

# Messages one batch re-scans in one short transaction, and how long a slice
# (one job) keeps taking batches before it hands the scan to its next job.
SCAN_BATCH_MESSAGES = 200
SLICE_SECONDS = 20.0

Step = Literal["more", "done", "lost"]
Transaction = Callable[[], AbstractContextManager[Session]]


@dataclass(frozen=True, slots=True)
class ScanProgress:
    """What a scan has done: ``messages_done`` of ``messages_total`` (counted when it began)."""

    id: int
    status: str
    conversation_id: int | None
    detector_version: str
    rescan_all: bool
    messages_done: int
    messages_total: int
    conversations_done: int
    spans_written: int
    created_at: datetime
    finished_at: datetime | None
    last_error: str | None

    @classmethod
    def of(cls, run: SecretScanRun) -> ScanProgress:
        return cls(
            run.id,
            run.status,
            run.conversation_id,
            run.detector_version,
            run.rescan_all,
            run.messages_done,
            max(run.messages_total, run.messages_done),
            run.conversations_done,
            run.spans_written,
            run.created_at,
            run.finished_at,
            run.last_error,
        )


def _scope(conversation_id: int | None) -> str:
    return "tenant" if conversation_id is None else f"conversation:{conversation_id}"


def start_scan(
    session: Session,
    tenant_id: str,
    settings: Settings,
    conversation_id: int | None = None,
    rescan_all: bool = False,
) -> ScanProgress:
    """Record a scan and ask for its job (sent after commit); :class:`SecretScanBusy` if
    one of the same scope is pending or running.

    ``settings`` are the tenant's effective ones: the version recorded is
    the detector's with the tenant's rules.
    """
    repo = SecretScanRepository(session)
    if conversation_id is not None and not repo.has_conversation(tenant_id, conversation_id):
        raise NotFound(f"no conversation {conversation_id}")  # another tenant's reads the same
    scope = _scope(conversation_id)
    busy = "secret scan {} of this scope is still {}; wait for it (lcm secrets scan --id {})"
    if (running := repo.active(tenant_id, scope)) is not None:
        raise SecretScanBusy(busy.format(running.id, running.status, running.id))
    now = utcnow()
    run = SecretScanRun(
        tenant_id=tenant_id,
        conversation_id=conversation_id,
        active_scope=scope,
        status="pending",
        detector_version=DetectionRules.of(settings).version,
        rescan_all=rescan_all,
        cursor_conversation_id=0,
        cursor_message_id=0,
        created_at=now,
        updated_at=now,
    )
    # The unique (tenant, active_scope) is the guard: of two concurrent
    # starts, the second's insert conflicts (or waits, then conflicts, on
    # Postgres), whatever the look-up above saw.
    savepoint = session.begin_nested()
    try:
        repo.add(run)
        savepoint.commit()
    except IntegrityError as exc:
        savepoint.rollback()
        raise SecretScanBusy("a secret scan of this scope is still running") from exc
    run.messages_total = repo.messages_in_scope(run)
    request_job(session, ScanSecrets(run.id))
    return ScanProgress.of(run)


def scan_progress(session: Session, tenant_id: str, scan_id: int) -> ScanProgress:
    run = SecretScanRepository(session).get(tenant_id, scan_id)
    if run is None:
        raise NotFound(f"no secret scan {scan_id}")
    return ScanProgress.of(run)


def run_scan_slice(
    transaction: Transaction,
    scan_id: int,
    owner: str,
    base: Settings,
    *,
    slice_seconds: float = SLICE_SECONDS,
    batch: int = SCAN_BATCH_MESSAGES,
) -> Step | None:
    """Claim the scan and run batches for up to ``slice_seconds``; None if it was not free.

    ``"more"``: the slice ended with work left, and asked for the next job in
    its last batch's transaction; ``"lost"``: a newer claim holds the scan.
    """
    now = utcnow()
    with transaction() as session:
        token = SecretScanRepository(session).claim(
            scan_id, owner, now, now + timedelta(seconds=base.lease_seconds)
        )
    if token is None:
        return None
    deadline = time.monotonic() + slice_seconds
    while True:
        with transaction() as session:
            step = _scan_batch(session, scan_id, token, base, batch)
            if step == "more" and time.monotonic() >= deadline:
                _hand_over(session, scan_id, token)
            if step != "more" or time.monotonic() >= deadline:
                return step


def _hand_over(session: Session, scan_id: int, token: int) -> None:
    """Free the lease and ask for the next slice (sent once this commits)."""
    run = SecretScanRepository(session).fenced(scan_id, token)
    if run is not None:
        # A slice that got this far succeeded: only failures in a row count.
        run.lease_owner, run.lease_expires_at, run.attempts = None, None, 0
        request_job(session, ScanSecrets(scan_id))


def _scan_batch(session: Session, scan_id: int, token: int, base: Settings, batch: int) -> Step:
    """One batch, fenced: the next messages of the cursor's conversation, or the next one."""
    repo = SecretScanRepository(session)
    run = repo.fenced(scan_id, token)
    if run is None:
        return "lost"
    now = utcnow()
    run.updated_at = now
    run.lease_expires_at = now + timedelta(seconds=base.lease_seconds)  # renewed each batch
    tenant_id = run.tenant_id
    if run.cursor_conversation_id == 0 or run.cursor_message_id < 0:
        following = repo.next_conversation(run, run.cursor_conversation_id)
        if following is None:
            run.status, run.active_scope, run.finished_at = "done", None, now
            run.lease_owner, run.lease_expires_at = None, None
            return "done"
        run.cursor_conversation_id, run.cursor_message_id = following, 0
        run.ordinal_floor = SecretSpanRepository(session).last_ordinal(tenant_id, following)
    conversation_id = run.cursor_conversation_id
    if not repo.lock_conversation(tenant_id, conversation_id):
        run.cursor_message_id = -1  # erased meanwhile
        return "more"
    ids = repo.message_batch(tenant_id, conversation_id, run.cursor_message_id, batch)
    settings = effective_settings(session, tenant_id, base)
    scan = SecretScan.of(settings)
    if ids:
        texts = [
            ScannedText(text, int(message_id), int(ordinal))
            for message_id, ordinal, part_type, text in repo.parts(tenant_id, ids)
            if part_type in SCANNED_PARTS and text
        ]
        written, run.ordinal_floor = rescan_messages(
            session, tenant_id, conversation_id, ids, texts, scan, run.ordinal_floor
        )
        run.cursor_message_id = ids[-1]
        run.messages_done += len(ids)
        run.spans_written += written
    if len(ids) < batch:
        repo.mark(tenant_id, conversation_id, scan.rules.version, now)
        run.cursor_message_id = -1
        run.conversations_done += 1
    return "more"


def fail_slice(
    transaction: Transaction, scan_id: int, owner: str, error: str, attempts: int
) -> None:
    """A slice raised: record why and free the lease (beat re-sends it) or, after
    ``attempts`` claims, mark the scan failed and free its scope."""
    with transaction() as session:
        run = SecretScanRepository(session).by_id(scan_id)
        if run is None or run.lease_owner != owner:
            return
        run.last_error = error[:2000]
        run.lease_owner, run.lease_expires_at = None, None
        if run.attempts >= attempts:
            run.status, run.active_scope, run.finished_at = "failed", None, utcnow()


def due_scans(session: Session, limit: int = 100) -> list[int]:
    """Scans to send again: pending or running with no live lease."""
    ids = SecretScanRepository(session).due(utcnow(), limit)
    for scan_id in ids:
        request_job(session, ScanSecrets(scan_id))
    return ids


def run_scan_job(transaction: Transaction, scan_id: int, owner: str, base: Settings) -> Step | None:
    """What the ``secrets.scan`` job runs: a slice; a failure recorded, never lost.

    A slice that raises frees its lease for beat to send again, up to
    ``max_attempts`` claims; then the scan is failed and its scope freed.
    """
    try:
        return run_scan_slice(transaction, scan_id, owner, base)
    except Exception as exc:
        fail_slice(transaction, scan_id, owner, f"{type(exc).__name__}: {exc}", base.max_attempts)
        raise

"""``lcm secrets scan``: stored spans rewritten under the current detector and rules.

On both databases: a scan after a rule change rewrites the spans, keeps the
ordinal of every value still found and numbers new ones above the old
highest; it is idempotent; it resumes after a crash from its cursor; one
scope cannot run twice at once (a race of starts, a race of claims); a
stale worker's fenced batch writes nothing. On Postgres, a real Celery
worker runs the job.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select, update

from lcm.content import IncomingMessage
from lcm.db.engine import Database
from lcm.db.models import SecretScanMark, SecretScanRun, SecretSpan, utcnow
from lcm.errors import SecretScanBusy
from lcm.ingest.service import ingest_messages, prepare_batch
from lcm.job_types import SECRETS_SCAN
from lcm.secrets import (
    DETECTOR_VERSION,
    DetectionRules,
    run_scan_slice,
    scan_progress,
    start_scan,
)
from lcm.secrets.scan_repository import SecretScanRepository
from lcm.secrets.scans import _scan_batch, due_scans
from lcm.secrets.service import SecretScan
from lcm.settings import Settings
from lcm.tenants.service import effective_settings, update_overrides
from tests.concurrency import race
from tests.conftest import new_tenant

KEY_A = "AKIA" + "QWER" * 4
KEY_B = "AKIA" + "ZXCV" * 4
ACME = "acme_live_" + "Q7w2" * 6


def texts() -> list[str]:
    """Twelve messages: two AWS keys (one repeated), an acme token the default misses."""
    out = [f"note {i}: nothing secret here at all" for i in range(12)]
    out[1] = f"first key {KEY_A}"
    out[4] = f"second key {KEY_B} and {ACME}"
    out[9] = f"again {KEY_A} and {ACME}"
    return out


def ingest(db: Database, tenant_id: str, key: str = "agent:scan") -> int:
    batch = prepare_batch(
        [IncomingMessage("user", t, client_id=f"m{i}") for i, t in enumerate(texts())],
        max_batch=100,
        max_chars=10**6,
    )
    with db.transaction() as session:
        result = ingest_messages(
            session, tenant_id, key, None, batch, secrets=SecretScan.of(db.settings)
        )
    return result.conversation_id


def spans(db: Database, conversation_id: int) -> list[tuple[Any, ...]]:
    with db.read_session() as s:
        rows = s.execute(
            select(
                SecretSpan.message_id,
                SecretSpan.part,
                SecretSpan.char_offset,
                SecretSpan.char_length,
                SecretSpan.kind,
                SecretSpan.ordinal,
            )
            .where(SecretSpan.conversation_id == conversation_id)
            .order_by(SecretSpan.message_id, SecretSpan.char_offset)
        )
        return [tuple(r) for r in rows]


def change_rules(db: Database, tenant_id: str) -> Settings:
    with db.transaction() as session:
        update_overrides(
            session,
            tenant_id,
            {
                "secrets_custom_patterns": [{"kind": "acme_key", "pattern": r"acme_live_\w{24}"}],
                "secrets_allow_list": [KEY_B],
            },
        )
    with db.read_session() as session:
        return effective_settings(session, tenant_id, db.settings)


def start(db: Database, tenant_id: str, conversation_id: int | None = None, **kw: Any) -> int:
    with db.transaction() as session:
        settings = effective_settings(session, tenant_id, db.settings)
        return start_scan(session, tenant_id, settings, conversation_id, **kw).id


def run_to_end(db: Database, scan_id: int, owner: str = "w", batch: int = 5) -> int:
    """Slices of one batch each (every slice hands over): how many slices ran."""
    slices = 0
    while True:
        step = run_scan_slice(
            db.transaction, scan_id, owner, db.settings, slice_seconds=0, batch=batch
        )
        slices += 1
        assert step is not None, "the lease was free"
        if step != "more":
            assert step == "done"
            return slices


def test_a_scan_applies_new_rules_and_keeps_ordinals(db: Database) -> None:
    tenant = new_tenant(db)
    cid = ingest(db, tenant.tenant_id)
    before = spans(db, cid)
    assert [(s[4], s[5]) for s in before] == [("aws_key", 1), ("aws_key", 2), ("aws_key", 1)]

    settings = change_rules(db, tenant.tenant_id)
    scan_id = start(db, tenant.tenant_id)
    with db.read_session() as s:
        assert scan_progress(s, tenant.tenant_id, scan_id).messages_total == 12
    assert run_to_end(db, scan_id) >= 3  # 12 messages in batches of 5, handed over each time

    after = spans(db, cid)
    kinds = [(s[4], s[5]) for s in after]
    # KEY_A keeps #1; KEY_B (allow-listed) is gone and its #2 is not given again;
    # the acme token is new: #3, the same value the same number both times.
    assert kinds == [("aws_key", 1), ("acme_key", 3), ("aws_key", 1), ("acme_key", 3)]
    with db.read_session() as s:
        progress = scan_progress(s, tenant.tenant_id, scan_id)
        mark = s.scalars(select(SecretScanMark)).one()
    assert progress.status == "done"
    assert progress.messages_done == 12
    assert progress.conversations_done == 1
    assert mark.detector_version == DetectionRules.of(settings).version
    assert mark.detector_version.startswith(DETECTOR_VERSION + "+")

    # Up to date: a second scan finds nothing stale; --all rewrites the same rows.
    again = start(db, tenant.tenant_id)
    run_to_end(db, again)
    with db.read_session() as s:
        assert scan_progress(s, tenant.tenant_id, again).messages_done == 0
    forced = start(db, tenant.tenant_id, rescan_all=True)
    run_to_end(db, forced, batch=100)
    assert spans(db, cid) == after


def test_a_crashed_scan_resumes_from_its_cursor(db: Database) -> None:
    tenant = new_tenant(db)
    cid = ingest(db, tenant.tenant_id)
    change_rules(db, tenant.tenant_id)
    scan_id = start(db, tenant.tenant_id)
    now = utcnow()
    with db.transaction() as session:
        token = SecretScanRepository(session).claim(scan_id, "crashed", now, now + timedelta(1))
    assert token is not None
    with db.transaction() as session:  # one batch commits, then the worker dies
        assert _scan_batch(session, scan_id, token, db.settings, 5) == "more"
    # While its lease lasts nobody else runs it, and beat does not resend it.
    assert run_scan_slice(db.transaction, scan_id, "other", db.settings) is None
    with db.transaction() as session:
        assert due_scans(session) == []
        session.execute(
            update(SecretScanRun).values(lease_expires_at=utcnow() - timedelta(seconds=1))
        )
    with db.transaction() as session:
        assert due_scans(session) == [scan_id]
    run_to_end(db, scan_id, owner="other")
    with db.read_session() as s:
        run = s.get(SecretScanRun, scan_id)
        assert run is not None
        assert (run.status, run.messages_done, run.attempts) == ("done", 12, 1)
        assert run.active_scope is None
    # The dead worker's token no longer writes anything.
    with db.transaction() as session:
        assert _scan_batch(session, scan_id, token, db.settings, 5) == "lost"
    assert [(s[4], s[5]) for s in spans(db, cid)] == [
        ("aws_key", 1),
        ("acme_key", 3),
        ("aws_key", 1),
        ("acme_key", 3),
    ]


def test_two_starts_of_one_scope_race_and_one_wins(db: Database) -> None:
    tenant = new_tenant(db)
    cid = ingest(db, tenant.tenant_id)
    raced = race(4, lambda _i: start(db, tenant.tenant_id, cid))
    assert len(raced.results) == 1, raced.errors
    assert len(raced.errors) == 3
    assert all(isinstance(e, SecretScanBusy) for e in raced.errors), raced.errors
    # Another scope (the whole tenant) is not blocked; once done, the scope is free again.
    other = start(db, tenant.tenant_id)
    run_to_end(db, raced.results[0])
    run_to_end(db, other)
    start(db, tenant.tenant_id, cid)


def test_two_workers_claim_one_scan_and_one_holds_it(db: Database) -> None:
    tenant = new_tenant(db)
    ingest(db, tenant.tenant_id)
    scan_id = start(db, tenant.tenant_id)

    def claim(i: int) -> int | None:
        now = utcnow()
        with db.transaction() as session:
            repo = SecretScanRepository(session)
            return repo.claim(scan_id, f"w{i}", now, now + timedelta(minutes=5))

    raced = race(4, claim)
    assert raced.errors == []
    assert sorted(raced.results, key=lambda t: t or 0) == [None, None, None, 1]


def test_a_conversation_of_another_tenant_is_not_found(db: Database) -> None:
    owner = new_tenant(db)
    stranger = new_tenant(db, "stranger")
    cid = ingest(db, owner.tenant_id)
    from lcm.errors import NotFound

    with pytest.raises(NotFound):
        start(db, stranger.tenant_id, cid)


def test_a_real_worker_runs_the_scan(
    celery_worker: Any, pg_db: Database, worker_env: dict[str, str]
) -> None:
    tenant = new_tenant(pg_db)
    cid = ingest(pg_db, tenant.tenant_id)
    change_rules(pg_db, tenant.tenant_id)
    scan_id = start(pg_db, tenant.tenant_id)
    celery_worker.send_task(SECRETS_SCAN.name, args=[scan_id], queue=SECRETS_SCAN.queue)
    # A duplicate delivery is harmless: it finds the lease held, or the scan done.
    celery_worker.send_task(SECRETS_SCAN.name, args=[scan_id], queue=SECRETS_SCAN.queue)
    deadline = time.monotonic() + 60
    status = "pending"
    while status != "done" and time.monotonic() < deadline:
        time.sleep(0.2)
        with pg_db.read_session() as s:
            status = scan_progress(s, tenant.tenant_id, scan_id).status
    assert status == "done"
    assert [s[4] for s in spans(pg_db, cid)] == ["aws_key", "acme_key", "aws_key", "acme_key"]


def test_a_failing_slice_is_retried_then_fails_the_scan(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lcm.secrets.scans as scans
    from lcm.secrets import run_scan_job

    tenant = new_tenant(db)
    cid = ingest(db, tenant.tenant_id)
    scan_id = start(db, tenant.tenant_id, cid)

    def broken(*_args: Any, **_kw: Any) -> Any:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(scans, "rescan_messages", broken)
    settings = db.settings.model_copy(update={"max_attempts": 2})
    for attempt in (1, 2):
        with pytest.raises(RuntimeError):
            run_scan_job(db.transaction, scan_id, f"w{attempt}", settings)
        with db.read_session() as s:
            run = s.get(SecretScanRun, scan_id)
            assert run is not None
            assert run.last_error == "RuntimeError: disk on fire"
            assert run.lease_owner is None  # freed at once: beat resends it
            assert run.status == ("running" if attempt == 1 else "failed")
    with db.transaction() as session:
        assert due_scans(session) == []
    assert spans(db, cid) != []  # the failed batches rolled back: old spans intact
    monkeypatch.undo()
    run_to_end(db, start(db, tenant.tenant_id, cid))  # the scope is free again


def test_erasure_takes_the_scans_and_marks_with_it(db: Database) -> None:
    from lcm.erasure.service import erase_conversation, erase_tenant

    tenant = new_tenant(db)
    cid = ingest(db, tenant.tenant_id)
    run_to_end(db, start(db, tenant.tenant_id, cid))
    tenant_scan = start(db, tenant.tenant_id)
    with db.transaction() as session:
        erase_conversation(session, tenant.tenant_id, cid)
    with db.read_session() as s:
        assert s.scalars(select(SecretScanMark)).all() == []
        assert [r.id for r in s.scalars(select(SecretScanRun))] == [tenant_scan]
    run_to_end(db, tenant_scan)  # nothing left to scan: it ends cleanly
    with db.transaction() as session:
        erase_tenant(session, tenant.tenant_id)
    with db.read_session() as s:
        assert s.scalars(select(SecretScanRun)).all() == []


def test_the_cli_hands_a_postgres_scan_to_the_workers_and_follows_it(
    celery_worker: Any, pg_db: Database, worker_env: dict[str, str]
) -> None:
    import json

    from tests.servers import run_lcm

    tenant = new_tenant(pg_db, "pgcli")
    cid = ingest(pg_db, tenant.tenant_id)
    change_rules(pg_db, tenant.tenant_id)
    done = run_lcm("secrets", "scan", "--tenant", "pgcli", "--json", env=worker_env)
    assert done.returncode == 0, done.stderr
    progress = json.loads(done.stdout)
    assert (progress["status"], progress["messages_done"]) == ("done", 12)
    with pg_db.read_session() as s:
        run = s.get(SecretScanRun, progress["id"])
        assert run is not None
        assert run.attempts == 1  # one claim, a worker's: without --inline the CLI only watches
    assert [s[4] for s in spans(pg_db, cid)] == ["aws_key", "acme_key", "aws_key", "acme_key"]

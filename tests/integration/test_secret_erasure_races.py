"""Erasure against the writers of the same conversation: ingest and a compaction pass.

An erasure takes the conversation's row lock before it reads the spans it
moves (lcm/secret_access/erasure.py): an ingest holding the lock finishes
first and its new occurrences of the value are erased too; a pass whose
summarizer call overlaps the erasure commits without bringing the value
back and leaves every span on the text it names. Both backends.
"""

from __future__ import annotations

import json
import threading
import time

from fastapi.testclient import TestClient
from sqlalchemy import select

from lcm.content import IncomingMessage
from lcm.db.engine import Database
from lcm.db.models import Message, Summary
from lcm.ingest.service import ingest_messages, prepare_batch
from lcm.secret_access import ErasureRequest, erase_secrets
from lcm.secrets import SecretScan
from lcm.summarize.llm import Breakers
from lcm.summarize.summarizer import Summarizer
from lcm.tenants.service import IssuedKey
from tests.e2e.test_secret_access_http import spans_consistent, stored_text
from tests.e2e.test_secret_masking_http import KEY, MODEL, SETTINGS, TOKEN, ingest
from tests.fakes import Behaviour, FakeAnthropicServer
from tests.fakes.providers import anthropic_provider
from tests.helpers import compact


def test_an_erasure_waits_for_an_ingest_holding_the_conversation_and_erases_its_messages_too(
    client: TestClient, tenant: IssuedKey, db: Database
) -> None:
    conversation_id = ingest(client, tenant)
    holding, release = threading.Event(), threading.Event()
    batch = prepare_batch(
        [IncomingMessage("user", f"again: GITHUB_TOKEN={TOKEN}")], max_batch=10, max_chars=10_000
    )

    def ingest_and_hold() -> None:
        with db.transaction() as session:
            ingest_messages(session, tenant.tenant_id, KEY, None, batch)
            holding.set()
            release.wait(30)  # the row lock is held until this commits

    writer = threading.Thread(target=ingest_and_hold)
    writer.start()
    assert holding.wait(30)
    done: list[object] = []
    eraser = threading.Thread(
        target=lambda: done.append(
            erase_secrets(
                db.transaction,
                tenant.tenant_id,
                ErasureRequest(value=TOKEN),
                SecretScan.of(db.settings),
            )
        )
    )
    eraser.start()
    time.sleep(1.0)
    assert eraser.is_alive()  # waiting for the ingest's lock, not working around it
    release.set()
    writer.join(30)
    eraser.join(60)
    assert not eraser.is_alive()
    assert len(done) == 1
    with db.read_session() as s:
        newest = s.scalars(
            select(Message.content)
            .where(Message.conversation_id == conversation_id)
            .order_by(Message.seq.desc())
        ).first()
    assert newest is not None
    assert newest.startswith("again: GITHUB_TOKEN=[secret:github_token#")
    assert TOKEN not in stored_text(db, conversation_id)
    spans_consistent(db, conversation_id)


def test_a_pass_overlapping_an_erasure_never_brings_the_value_back(
    client: TestClient, tenant: IssuedKey, db: Database, llm: FakeAnthropicServer
) -> None:
    conversation_id = ingest(client, tenant)
    llm.set_default(Behaviour.ok(delay=0.4))
    provider = anthropic_provider(llm.base_url, MODEL, breakers=Breakers(5, 30))
    errors: list[BaseException] = []

    def run_compaction() -> None:
        try:
            compact(
                db,
                tenant.tenant_id,
                conversation_id,
                SETTINGS,
                4_000,
                summarizer=Summarizer(provider),
            )
        except BaseException as exc:  # collected for the assertion below
            errors.append(exc)

    compactor = threading.Thread(target=run_compaction)
    compactor.start()
    deadline = time.monotonic() + 30
    while not llm.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    assert llm.requests  # the first pass is inside its summarizer call
    erased = erase_secrets(
        db.transaction, tenant.tenant_id, ErasureRequest(value=TOKEN), SecretScan.of(db.settings)
    )
    assert erased.spans > 0
    compactor.join(120)
    assert not compactor.is_alive()
    assert errors == []
    with db.read_session() as s:
        summaries = list(
            s.scalars(select(Summary.content).where(Summary.conversation_id == conversation_id))
        )
    assert len(summaries) >= 2  # passes ran before and after the erasure
    assert TOKEN not in stored_text(db, conversation_id)
    spans_consistent(db, conversation_id)
    for request in llm.requests:
        assert TOKEN not in json.dumps(request.body)

"""Keys remembered per process (``lcm/tenants/key_cache.py``): no read per request, and the bounds.

A key found active is not read again for ``LCM_KEY_CACHE_SECONDS``. A
revocation, a tenant's settings change or a tenant's erasure committed in
this process holds on the next request; one committed elsewhere (here: the
row changed by a statement, as another process would) holds once the bound
has passed. A read that began before a revocation committed never brings
the key back.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from lcm.db.engine import Database
from lcm.db.models import ApiKey
from lcm.erasure import erase_tenant
from lcm.errors import Unauthenticated
from lcm.tenants import update_overrides
from lcm.tenants.key_cache import KeyCache
from lcm.tenants.keys import IssuedKey, authenticate_with_tenant, remembered_key, revoke_key
from tests.conftest import RecordingSender, api_client, auth, new_tenant

URL = "/v1/conversations/agent:main/messages"
ASK = {"messages": [{"role": "user", "content": "hello"}]}
BOUND = 0.5


@pytest.fixture
def bounded_client(db: Database) -> Iterator[TestClient]:
    settings = db.settings.model_copy(update={"key_cache_seconds": BOUND})
    yield from api_client(settings, db, RecordingSender())


def test_a_key_is_read_once_then_remembered(bounded_client: TestClient, db: Database) -> None:
    issued = new_tenant(db)
    assert remembered_key(issued.api_key, BOUND) is None
    assert bounded_client.post(URL, json=ASK, headers=auth(issued)).status_code == 200
    found = remembered_key(issued.api_key, BOUND)
    assert found is not None
    assert found[0].tenant_id == issued.tenant_id
    time.sleep(BOUND)
    assert remembered_key(issued.api_key, BOUND) is None  # too old: read again


def test_a_revocation_in_this_process_holds_on_the_next_request(
    bounded_client: TestClient, db: Database
) -> None:
    issued = new_tenant(db)
    assert bounded_client.post(URL, json=ASK, headers=auth(issued)).status_code == 200
    with db.transaction() as session:
        revoke_key(session, issued.tenant_id, issued.key.id)
    response = bounded_client.post(URL, json=ASK, headers=auth(issued))
    assert response.status_code == 401


def test_a_revocation_elsewhere_holds_within_the_bound(
    bounded_client: TestClient, db: Database
) -> None:
    issued = new_tenant(db)
    assert bounded_client.post(URL, json=ASK, headers=auth(issued)).status_code == 200
    with db.transaction() as session:  # as another process revokes: nothing told this one
        session.execute(
            update(ApiKey).where(ApiKey.id == issued.key.id).values(revoked_at=ApiKey.created_at)
        )
    revoked_at = time.monotonic()
    # Timed by when each request began, not ended: on a busy host one
    # request can take longer than the margin, and a request that began
    # within the bound may still be answered from what was remembered.
    seen: list[tuple[float, int]] = []
    while not seen or seen[-1][0] < BOUND + 0.1:
        began = time.monotonic() - revoked_at
        seen.append((began, bounded_client.post(URL, json=ASK, headers=auth(issued)).status_code))
        time.sleep(0.02)
    statuses = [status for _, status in seen]
    assert statuses[-1] == 401, seen  # began past the bound: the key was read again
    refused_from = statuses.index(401)
    assert all(status == 401 for status in statuses[refused_from:])


def test_a_settings_change_and_an_erasure_forget_the_tenants_keys(
    bounded_client: TestClient, db: Database
) -> None:
    issued = new_tenant(db)
    assert bounded_client.post(URL, json=ASK, headers=auth(issued)).status_code == 200
    assert remembered_key(issued.api_key, BOUND) is not None
    with db.transaction() as session:
        update_overrides(session, issued.tenant_id, {"max_assembly_token_budget": 4000})
    assert remembered_key(issued.api_key, BOUND) is None
    assert bounded_client.post(URL, json=ASK, headers=auth(issued)).status_code == 200
    found = remembered_key(issued.api_key, BOUND)
    assert found is not None
    assert found[1] != {}  # the new overrides, read again
    with db.transaction() as session:
        erase_tenant(session, issued.tenant_id)
    assert remembered_key(issued.api_key, BOUND) is None
    assert bounded_client.post(URL, json=ASK, headers=auth(issued)).status_code == 401


def test_zero_seconds_remembers_nothing(db: Database) -> None:
    issued = new_tenant(db)
    with db.lookup_session() as session:
        authenticate_with_tenant(session, issued.api_key, remember_seconds=0)
    assert remembered_key(issued.api_key, 60) is None


def test_a_read_racing_a_revocation_never_brings_the_key_back(db: Database) -> None:
    """Readers authenticate in a loop while the key is revoked: once the
    revocation has committed, the key is never remembered again (a read that
    began before the commit and stored after it would be)."""
    for attempt in range(5):
        issued = new_tenant(db, f"racer-{attempt}")
        stale = _race_a_revocation(db, issued)
        assert stale == []
        assert remembered_key(issued.api_key, 60) is None


def _race_a_revocation(db: Database, issued: IssuedKey) -> list[float]:
    """Revoke ``issued`` while three threads authenticate it; when each saw it
    remembered after the revocation had committed."""
    committed = threading.Event()
    stop = threading.Event()
    stale: list[float] = []

    def read() -> None:
        while not stop.is_set():
            try:
                with db.lookup_session() as session:
                    authenticate_with_tenant(session, issued.api_key, remember_seconds=60)
            except Unauthenticated:
                pass
            if committed.is_set() and remembered_key(issued.api_key, 60) is not None:
                stale.append(time.monotonic())

    readers = [threading.Thread(target=read) for _ in range(3)]
    for reader in readers:
        reader.start()
    time.sleep(0.05)
    with db.transaction() as session:
        revoke_key(session, issued.tenant_id, issued.key.id)
    committed.set()
    time.sleep(0.1)
    stop.set()
    for reader in readers:
        reader.join()
    return stale


def test_a_put_of_a_read_older_than_a_forget_is_dropped() -> None:
    now = [0.0]
    cache = KeyCache(size=2, clock=lambda: now[0])
    generation = cache.generation
    cache.forget()  # a revocation committed while the read was under way
    cache.put("h1", (object(), {}), generation)
    assert cache.get("h1", 1.0) is None
    cache.put("h1", ("p1", {}), cache.generation)
    assert cache.get("h1", 1.0) == ("p1", {})
    now[0] = 1.0
    assert cache.get("h1", 1.0) is None  # the bound is exclusive
    cache.put("h2", ("p2", {}), cache.generation)
    cache.put("h3", ("p3", {}), cache.generation)
    assert cache.get("h1", 5.0) is None  # bounded: the oldest went
    assert cache.get("h3", 5.0) == ("p3", {})

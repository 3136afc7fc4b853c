"""``lcm serve`` killed with SIGKILL: nothing acknowledged is lost, compaction resumes.

Real processes: the embedded server is started, killed mid-pass and
restarted over the same SQLite file; summaries come from the fake Messages
API with latency, so a pass is in flight when the kill lands. Leases are
short (``LCM_LEASE_SECONDS``) and the in-process reconciler frequent, so
recovery takes seconds instead of minutes.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from lcm.db.engine import Database
from lcm.db.models import CompactionDebt, CompactionRun, Message, Summary, SummaryMessage
from tests import servers
from tests.conftest import settings_for
from tests.fakes import FakeAnthropicServer
from tests.integration.test_compaction_engine import assert_lossless

BUDGET = 2_000
THRESHOLD = int(0.75 * BUDGET)


@dataclass
class Embedded:
    """One SQLite home that ``lcm serve`` is started over again and again."""

    home: Path
    env: dict[str, str]
    key: str
    database: Database

    def start(self) -> servers.ServeHandle:
        return servers.start_serve(self.env, log=self.home / "serve.log")

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}

    def debts(self) -> dict[int, str]:
        with self.database.session() as s:
            rows = s.execute(select(CompactionDebt.conversation_id, CompactionDebt.status))
            return {cid: status for cid, status in rows}

    def wait_settled(self, timeout: float) -> dict[int, str]:
        """Poll the database until every debt is done (or the time is up)."""
        deadline = time.monotonic() + timeout
        while True:
            debts = self.debts()
            if all(status == "done" for status in debts.values()) or time.monotonic() > deadline:
                return debts
            time.sleep(0.2)


@pytest.fixture
def embedded(tmp_path: Path) -> Iterator[tuple[Embedded, FakeAnthropicServer]]:
    home = tmp_path / "home"
    url, key = servers.embedded_home(home, "crash")
    database = Database(settings_for(url))
    with FakeAnthropicServer(default="latency:0.5") as fake:
        env = {
            "LCM_HOME": str(home),
            "ANTHROPIC_API_KEY": "sk-test",
            "LCM_ANTHROPIC_BASE_URL": fake.base_url,
            "LCM_LLM_MAX_RETRIES": "0",
            "LCM_FRESH_TAIL_COUNT": "4",
            "LCM_LEAF_MIN_FANOUT": "4",
            "LCM_LEAF_CHUNK_TOKENS": "400",
            # A pass (0.5 s here) must fit in its lease; a dead holder's lease
            # must run out soon after the kill.
            "LCM_LEASE_SECONDS": "3",
            "LCM_RECONCILE_INTERVAL_SECONDS": "0.5",
            "LCM_RECONCILE_GRACE_SECONDS": "1",
        }
        yield Embedded(home, env, key, database), fake
    database.dispose()


def turn_messages(key: str, start: int, n: int) -> list[dict[str, str]]:
    return [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "id": f"{key}-{i}",
            "content": f"message {i}: rebuilt the index of shard {i % 5} and reran checks " * 6,
        }
        for i in range(start, start + n)
    ]


def duplicate_summaries(database: Database, conversation_id: int) -> int:
    """Messages under two leaf summaries, plus summaries no committed run accounts for."""
    with database.session() as s:
        links = Counter(
            s.scalars(
                select(SummaryMessage.message_id)
                .join(Message, Message.id == SummaryMessage.message_id)
                .where(Message.conversation_id == conversation_id)
            )
        )
        summaries = s.scalar(
            select(func.count())
            .select_from(Summary)
            .where(Summary.conversation_id == conversation_id)
        )
        committed = s.scalar(
            select(func.count())
            .select_from(CompactionRun)
            .where(
                CompactionRun.conversation_id == conversation_id,
                CompactionRun.summary_id.is_not(None),
            )
        )
    return sum(1 for n in links.values() if n > 1) + abs((summaries or 0) - (committed or 0))


def test_a_sigkill_mid_pass_resumes_after_restart(
    embedded: tuple[Embedded, FakeAnthropicServer],
) -> None:
    service, fake = embedded
    serve = service.start()
    try:
        r = httpx.post(
            f"{serve.base_url}/v1/conversations/crash/turns",
            headers=service.headers(),
            json={"messages": turn_messages("crash", 0, 24), "token_budget": BUDGET},
        )
        assert r.status_code == 200, r.text
        assert r.json()["compaction"] == "scheduled", r.text
        cid = r.json()["conversation_id"]
        deadline = time.monotonic() + 20
        while len(fake.requests) < 2:  # the second pass is in flight
            assert time.monotonic() < deadline, "no summary was requested"
            time.sleep(0.02)
    finally:
        serve.kill()
    assert service.debts()[cid] == "running"  # the killed holder's row, lease and all
    serve = service.start()
    try:
        assert service.wait_settled(30)[cid] == "done"
    finally:
        serve.stop()
    assert duplicate_summaries(service.database, cid) == 0
    assert_lossless(service.database, cid)


def test_a_restart_does_not_wait_out_the_dead_holders_lease(
    embedded: tuple[Embedded, FakeAnthropicServer],
) -> None:
    """With the default 5-minute lease, the restarted server resumes in seconds."""
    service, fake = embedded
    service.env["LCM_LEASE_SECONDS"] = "300"
    service.env["LCM_RECONCILE_INTERVAL_SECONDS"] = "30"  # only the run at start matters
    serve = service.start()
    try:
        r = httpx.post(
            f"{serve.base_url}/v1/conversations/crash/turns",
            headers=service.headers(),
            json={"messages": turn_messages("crash", 0, 24), "token_budget": BUDGET},
        )
        assert r.status_code == 200, r.text
        cid = r.json()["conversation_id"]
        deadline = time.monotonic() + 20
        while not fake.requests:  # a pass is in flight
            assert time.monotonic() < deadline, "no summary was requested"
            time.sleep(0.02)
    finally:
        serve.kill()
    assert service.debts()[cid] == "running"
    serve = service.start()
    try:
        # Well under the 300 s lease: the killed process's lease was ended at start.
        assert service.wait_settled(30)[cid] == "done"
    finally:
        serve.stop()
    assert duplicate_summaries(service.database, cid) == 0
    assert_lossless(service.database, cid)


@dataclass
class Client:
    """One gateway conversation: posts turns with client ids, remembers what was acknowledged."""

    key: str
    next_id: int = 0
    unacknowledged: list[dict[str, str]] = field(default_factory=list)
    acknowledged: set[str] = field(default_factory=set)
    refused: list[str] = field(default_factory=list)

    def run(self, base: str, headers: dict[str, str], stop: threading.Event) -> None:
        with httpx.Client(base_url=base, headers=headers, timeout=10) as http:
            while not stop.is_set():
                if not self.unacknowledged:  # else resend the same ids: idempotent
                    self.unacknowledged = turn_messages(self.key, self.next_id, 4)
                    self.next_id += 4
                try:
                    r = http.post(
                        f"/v1/conversations/{self.key}/turns",
                        json={"messages": self.unacknowledged, "token_budget": BUDGET},
                    )
                except httpx.HTTPError:
                    return  # the server died under us: whether it stored this is unknown
                if r.status_code != 200:
                    self.refused.append(r.text)
                    return
                self.acknowledged.update(m["id"] for m in self.unacknowledged)
                self.unacknowledged = []
                stop.wait(0.25)  # a gateway's turns are paced by its model calls


def run_clients(service: Embedded, clients: list[Client], seconds: float, *, kill: bool) -> int:
    """Start the server, let the clients post for ``seconds``, then SIGKILL it (or not).

    Returns how many debts the kill left running (passes it cut short).
    """
    serve = service.start()
    stop = threading.Event()
    threads = [
        threading.Thread(target=c.run, args=(serve.base_url, service.headers(), stop))
        for c in clients
    ]
    for t in threads:
        t.start()
    time.sleep(seconds)
    if kill:
        serve.kill()  # requests in flight die with it
    stop.set()
    for t in threads:
        t.join(15)
    if kill:
        return sum(1 for status in service.debts().values() if status == "running")
    service.wait_settled(30)
    serve.stop()
    return 0


def test_a_kill_loop_during_ingest_loses_nothing_and_stalls_nothing(
    embedded: tuple[Embedded, FakeAnthropicServer],
) -> None:
    service, fake = embedded
    fake.set_default("latency:0.3")
    # Each kill mid-pass counts as a failed attempt of that pass's debt.
    service.env["LCM_MAX_ATTEMPTS"] = "20"
    service.env["LCM_LEAF_CHUNK_TOKENS"] = "2000"  # fewer, larger passes keep up with ingest
    clients = [Client(f"conv-{n}") for n in range(4)]
    rng = random.Random(7)
    kills = 5
    started = time.monotonic()
    cut = sum(run_clients(service, clients, rng.uniform(1.0, 3.0), kill=True) for _ in range(kills))
    run_clients(service, clients, 1.0, kill=False)  # the final, clean start
    figures = _figures(service.database, clients, service.debts())
    figures["kills"] = kills
    figures["sweeps_cut_by_a_kill"] = cut
    figures["seconds"] = round(time.monotonic() - started, 1)
    print(f"\nkill loop: {figures}")
    assert not [r for c in clients for r in c.refused]
    assert figures["acknowledged"] > 0
    assert figures["lost"] == figures["duplicated"] == figures["seq_gaps"] == 0, figures
    assert figures["stalled"] == figures["duplicate_summaries"] == 0, figures
    for cid in service.debts():
        assert_lossless(service.database, cid)


def _figures(
    database: Database, clients: list[Client], debts: dict[int, str]
) -> dict[str, int | float]:
    with database.session() as s:
        rows = s.execute(select(Message.conversation_id, Message.seq, Message.client_id)).all()
    stored = Counter(client_id for _, _, client_id in rows)
    seqs: dict[int, list[int]] = {}
    for cid, seq, _ in rows:
        seqs.setdefault(cid, []).append(seq)
    acknowledged = set().union(*(c.acknowledged for c in clients))
    gaps = sum(1 for s in seqs.values() if sorted(s) != list(range(min(s), min(s) + len(s))))
    return {
        "acknowledged": len(acknowledged),
        "stored": len(stored),
        "lost": len(acknowledged - set(stored)),
        "duplicated": sum(1 for n in stored.values() if n > 1),
        "seq_gaps": gaps,
        "stalled": sum(1 for status in debts.values() if status != "done"),
        "duplicate_summaries": sum(duplicate_summaries(database, cid) for cid in seqs),
        "conversations": len(seqs),
    }

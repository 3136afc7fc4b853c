"""Console page render times on a 20,000-message conversation with ~1,650 summaries.

A real ``lcm serve`` (embedded SQLite) over a history built straight into the
database (``bench.compaction.build_history``: 19,800 messages under leaf and
condensed summaries, a raw tail of 200). Each page is fetched over HTTP by a
signed-in session, ``--repeat`` times (at least 20); the p50 and p95 of the
whole request (server render + transfer on loopback) are printed.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import time
from pathlib import Path

import httpx
from sqlalchemy import select

from bench.compaction import build_history
from lcm.db.engine import Database
from lcm.db.migrate import upgrade
from lcm.db.models import Summary
from lcm.settings import Settings
from lcm.tenants.service import create_tenant
from tests import servers

MESSAGES = 20_000


def _sign_in(base: str, key: str) -> httpx.Client:
    client = httpx.Client(base_url=base, timeout=120)
    form = client.get("/console/login").text
    token = re.search(r'name="login_token" value="([^"]+)"', form)
    assert token is not None
    done = client.post("/console/login", data={"api_key": key, "login_token": token.group(1)})
    assert done.status_code == 303, done.text
    return client


def _pages(db: Database, cid: int) -> dict[str, str]:
    with db.read_session() as s:
        top = s.scalar(
            select(Summary.id).where(Summary.conversation_id == cid).order_by(Summary.depth.desc())
        )
        leaf = s.scalar(
            select(Summary.id).where(Summary.conversation_id == cid, Summary.kind == "leaf")
        )
    return {
        "conversations list": "/console/conversations",
        "conversation (window, DAG, runs)": f"/console/conversations/{cid}",
        "conversation, budget 20k": f"/console/conversations/{cid}?budget=20000",
        "DAG leaf row, oldest page": f"/console/conversations/{cid}?level0=1000",
        "leaf summary + messages": f"/console/summaries/{leaf}",
        "top summary": f"/console/summaries/{top}",
        "messages around #10000": f"/console/conversations/{cid}/messages?seq=10000",
        "search (full text)": "/console/search?q=retry+loop",
        "live": "/console/live",
    }


def run(args: argparse.Namespace) -> None:
    repeat = max(20, args.repeat)
    home = servers.make_workdir()
    try:
        url = f"sqlite:///{home / 'lcm.db'}"
        upgrade(url)
        db = Database(Settings(database_url=url, broker_url="memory://"))
        with db.transaction() as s:
            issued = create_tenant(s, "bench")
        started = time.perf_counter()
        cid = build_history(db, issued.tenant_id, "bench-20k", MESSAGES)
        with db.read_session() as s:
            summaries = len(
                list(s.scalars(select(Summary.id).where(Summary.conversation_id == cid)))
            )
        print(
            f"  built {MESSAGES:,} messages, {summaries:,} summaries "
            f"in {time.perf_counter() - started:.1f} s",
            flush=True,
        )
        pages = _pages(db, cid)
        db.dispose()
        handle = servers.start_serve({"LCM_HOME": str(home)}, log=home / "serve.log")
        try:
            client = _sign_in(handle.base_url, issued.api_key)
            print(f"  page render over HTTP, {repeat} requests each: p50 / p95 (ms), size")
            for name, path in pages.items():
                answer = client.get(path)
                assert answer.status_code == 200, (path, answer.status_code, answer.text[:500])
                times = []
                for _ in range(repeat):
                    t0 = time.perf_counter()
                    client.get(path).raise_for_status()
                    times.append((time.perf_counter() - t0) * 1000)
                p95 = statistics.quantiles(times, n=20)[-1]
                print(
                    f"  {name:34s} {statistics.median(times):7.1f} / {p95:7.1f}"
                    f"   {len(answer.content) / 1024:6.0f} KiB",
                    flush=True,
                )
        finally:
            handle.stop()
    finally:
        shutil.rmtree(Path(home), ignore_errors=True)

"""Resident memory of ``lcm serve`` under large bodies (issue: trust boundaries).

``lcm serve`` (embedded, offline summarizer) receives 50 concurrent POSTs of
15 MB of invalid JSON, with no key, then the same with a wrong key; the
server's resident set (its process and children, from ``/proc``) is sampled
throughout. The figure is the peak growth over the idle server. Then one
authenticated body over ``LCM_MAX_BODY_BYTES`` (413 expected) and one normal
ingest (200). Status codes and wall time are printed with the memory.

``--body-source DIR`` runs the server from another source tree (e.g.
``git archive <commit> | tar -x -C DIR``) to measure a "before" figure.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from tests import servers

REQUESTS = 50
BODY_BYTES = 15 * 1024 * 1024
PATH = "/v1/conversations/bench/messages"


def resident_kib(pid: int) -> int:
    """VmRSS of ``pid`` and its children, KiB."""
    total = 0
    pids = [pid]
    children = Path(f"/proc/{pid}/task/{pid}/children")
    if children.exists():
        pids += [int(p) for p in children.read_text().split()]
    for one in pids:
        try:
            for line in Path(f"/proc/{one}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except FileNotFoundError:
            pass
    return total


class PeakSampler:
    """Samples the server's resident set every 20 ms until stopped."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = resident_kib(pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, resident_kib(self.pid))

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()


def post(base_url: str, body: bytes, headers: dict[str, str]) -> str:
    """The status code, or the transport error's name (a server may close early)."""
    try:
        response = httpx.post(
            base_url + PATH,
            content=body,
            headers={"content-type": "application/json", **headers},
            timeout=120,
        )
        return str(response.status_code)
    except httpx.HTTPError as exc:
        return type(exc).__name__


def flood(
    base_url: str, pid: int, headers: dict[str, str], label: str, requests: int = REQUESTS
) -> tuple[Counter[str], int]:
    """Concurrent 15 MB bodies; prints codes, time and peak growth; returns codes and
    growth (KiB)."""
    body = b"{" * BODY_BYTES  # one buffer shared by every sender
    idle = resident_kib(pid)
    started = time.monotonic()
    with PeakSampler(pid) as sampler, ThreadPoolExecutor(requests) as pool:
        codes = Counter(pool.map(lambda _i: post(base_url, body, headers), range(requests)))
    elapsed = time.monotonic() - started
    growth = sampler.peak - idle
    print(
        f"{label}: {requests} x {BODY_BYTES >> 20} MB in {elapsed:.2f} s; codes {dict(codes)}; "
        f"resident idle {idle / 1024:.0f} MB, peak {sampler.peak / 1024:.0f} MB, "
        f"growth {growth / 1024:.0f} MB",
        flush=True,
    )
    return codes, growth


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--body-source",
        default=None,
        help="source tree the body_memory scenario runs lcm serve from (a before figure)",
    )


def run(args: argparse.Namespace) -> None:
    home = Path(tempfile.mkdtemp(prefix="lcm-bench-body-"))
    source = Path(args.body_source) if args.body_source else None
    try:
        handle = servers.start_serve(
            {"LCM_HOME": str(home / "home"), "ANTHROPIC_API_KEY": ""},
            log=home / "serve.log",
            cwd=source,
        )
        try:
            key = handle.printed_key()
            pid = handle.process.pid
            flood(handle.base_url, pid, {}, "no key")
            flood(handle.base_url, pid, {"authorization": "Bearer lcm_wrong"}, "wrong key")
            over = post(
                handle.base_url,
                b"x" * (16 * 1024 * 1024 + 1),
                {"authorization": f"Bearer {key}"},
            )
            normal = post(
                handle.base_url,
                b'{"messages":[{"role":"user","content":"hello","id":"m1"}]}',
                {"authorization": f"Bearer {key}"},
            )
            print(f"authenticated over the limit: {over}; normal ingest: {normal}", flush=True)
        finally:
            handle.stop()
    finally:
        shutil.rmtree(home, ignore_errors=True)

"""Two trees under one gateway load at the same time: what a change does to a turn's CPU.

The machine these benchmarks run on changes speed by a quarter within
minutes, so the effect of a change on the API's CPU per turn (a few percent)
hides in the noise of runs taken one after the other. Here two deployments,
each one ``lcm api`` process and one worker with their own database and
Redis database, serve the same replayed gateway load (``bench gateway``'s
turns and fake model) at the same time, half the conversations each: the
machine's drift falls on both alike. ``--against PATH`` names the other
tree, a checkout such as a ``git worktree`` of the commit before a change;
each side migrates its database, creates its tenants and runs its processes
with its own code (the load is this tree's client, so both must speak its
API). Without ``--against`` both sides run this tree, and the
difference between them is the method's own noise. With ``--embedded`` each
side is one ``lcm serve`` (its in-process worker included) on a SQLite home
of its own, and the CPU compared is that process's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench.deployment import (
    DEPLOYMENT_ENV,
    CpuMeter,
    Servers,
    bench_servers,
    deployment_env,
    drop_database,
    fresh_database,
    redis_database,
    spawn,
    stop,
    wait_ready,
)
from bench.workload import (
    Drive,
    LcmTarget,
    Load,
    ModelLikeLLM,
    Step,
    drive_load,
    real_steps,
    synthetic_steps,
)
from tests import servers
from tests.fakes import FakeAnthropicServer

HERE = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Side:
    label: str
    base_url: str
    api_pid: int
    keys: list[str]


def _cli(tree: Path, env: dict[str, str], *args: str) -> str:
    """``lcm`` run from ``tree``'s own code; its standard output."""
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        env={**os.environ, **env},
        cwd=tree,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


@contextmanager
def deployment(
    srv: Servers, llm: FakeAnthropicServer, tree: Path, label: str, index: int, tenants: int
) -> Iterator[Side]:
    """One API process and one worker from ``tree`` on a database of their own."""
    name = f"gateway_ab_{os.getpid()}_{index}"
    url = fresh_database(srv.admin_url, name)
    env = {
        **deployment_env(url, redis_database(srv, index), llm.base_url),
        "PYTHONPATH": str(tree),
    }
    processes = []
    try:
        _cli(tree, env, "db", "upgrade")
        keys = [
            json.loads(_cli(tree, env, "tenant", "create", f"ab-{n}", "--json"))["api_key"]
            for n in range(tenants)
        ]
        port = servers.free_port()
        log = srv.workdir / f"ab-{index}.log"
        api = spawn(["cli.main", "api", "--host", "127.0.0.1", "--port", str(port)], env, log, tree)
        worker = spawn(["cli.main", "worker", "--hostname", f"ab{index}@%h"], env, log, tree)
        processes = [api, worker]
        base = f"http://127.0.0.1:{port}"
        wait_ready(base, processes, log)
        yield Side(label, base, api.pid, keys)
    finally:
        stop(processes)
        drop_database(srv.admin_url, name)


@contextmanager
def embedded_deployment(
    workdir: Path, llm: FakeAnthropicServer, tree: Path, label: str, index: int, tenants: int
) -> Iterator[Side]:
    """One ``lcm serve`` from ``tree`` on a SQLite home of its own."""
    home = workdir / f"ab-home-{index}"
    home.mkdir()
    env = {**DEPLOYMENT_ENV, "LCM_HOME": str(home), "LCM_ANTHROPIC_BASE_URL": llm.base_url}
    _cli(tree, env | {"PYTHONPATH": str(tree)}, "db", "upgrade")
    keys = [
        json.loads(
            _cli(tree, env | {"PYTHONPATH": str(tree)}, "tenant", "create", f"ab-{n}", "--json")
        )["api_key"]
        for n in range(tenants)
    ]
    serve = servers.start_serve(env, log=workdir / f"ab-{index}.log", cwd=tree, ready_seconds=180)
    try:
        yield Side(label, serve.base_url, serve.process.pid, keys)
    finally:
        serve.stop()


@dataclass(frozen=True)
class Result:
    label: str
    turns_per_second: float
    api_cores: float
    api_ms_per_turn: float
    errors: int


def compare(srv: Servers | None, against: Path, load: Load, steps: list[Step]) -> list[Result]:
    """This tree and ``against`` side by side under ``load`` each, at the same time
    (``srv`` None: embedded, one ``lcm serve`` each)."""
    workdir = servers.make_workdir() if srv is None else srv.workdir
    with ModelLikeLLM() as llm, ExitStack() as stack:
        sides = [
            stack.enter_context(
                embedded_deployment(workdir, llm, tree, label, n, load.tenants)
                if srv is None
                else deployment(srv, llm, tree, label, n, load.tenants)
            )
            for n, (label, tree) in enumerate((("this tree", HERE), ("against", against)))
        ]
        meter = CpuMeter({side.label: [side.api_pid] for side in sides})
        drives = asyncio.run(_drive_both(sides, steps, load))
        cores = meter.cores()
    results = []
    for side, drive in zip(sides, drives, strict=True):
        rate = drive.turns / drive.seconds
        used = cores[side.label]
        per_turn = used * 1000 / rate if rate else float("nan")
        results.append(Result(side.label, rate, used, per_turn, sum(drive.errors.values())))
    return results


def run(args: argparse.Namespace) -> None:
    against = Path(args.against).resolve() if args.against else HERE
    print(f"  this tree {HERE}; against {against}", flush=True)
    # Half the default gateway load each: the two sides together load the
    # machine as one default deployment does.
    load = Load(args.tenants, max(1, args.conversations // 2), args.seconds)
    steps = real_steps() or synthetic_steps()
    if getattr(args, "embedded", False):
        ours, theirs = compare(None, against, load, steps)
    else:
        with bench_servers() as srv:
            ours, theirs = compare(srv, against, load, steps)
    what = "serve" if getattr(args, "embedded", False) else "API"
    for result in (ours, theirs):
        print(
            f"  {result.label:>9}: {result.turns_per_second:5.1f} turns/s, API "
            f"{result.api_cores:.2f} cores, {result.api_ms_per_turn:5.1f} ms of {what} CPU per "
            f"turn, errors {result.errors}",
            flush=True,
        )
    change = ours.api_ms_per_turn / theirs.api_ms_per_turn - 1
    print(f"  API CPU per turn, this tree against the other: {change:+.1%}", flush=True)


async def _drive_both(sides: list[Side], steps: list[Step], load: Load) -> list[Drive]:
    targets = [LcmTarget(side.base_url, side.keys, load.token_budget) for side in sides]
    return list(await asyncio.gather(*(drive_load(t, steps, load) for t in targets)))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument_group("gateway_ab").add_argument(
        "--against",
        default=None,
        help="the other tree (a checkout) gateway_ab runs beside this one (default: this tree)",
    )

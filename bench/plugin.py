"""The OpenClaw plugin's cost per turn as a session grows (``python -m bench plugin``).

``lcm serve`` (embedded) and a Node driver (``clients/openclaw/bench/turns.ts``)
that runs gateway turns through OpenClaw's host functions over a real OpenClaw
SQLite session holding 50, 2,000 and 20,000 messages, once the server has
compacted what the import left (a gateway's workers keep up with its turns;
the import itself is not timed). Per turn (median): the
bytes the plugin sent, its requests, the time spent in its HTTP round trips
(the server's time, on loopback), and the plugin's own time beside them; the
legacy slot (OpenClaw's pass-through engine) runs the same turns in the same
run. Then two turns while lcm-server hangs (a proxy that never answers), at
the plugin's default timeout. ``--plugin-source DIR`` runs another tree's plugin (e.g. ``git archive
<commit> clients/openclaw | tar -x -C DIR``) for a before figure.

Goal: bytes and server time per turn at 20,000 messages within 1.5x of 50.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests import servers
from tests.openclaw_env import PLUGIN_DIR, provision

DRIVER = PLUGIN_DIR / "bench" / "turns.ts"
HUNG = PLUGIN_DIR / "bench" / "hung.ts"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--plugin-sizes", default="50,2000,20000", help="stored messages per session (plugin)"
    )
    parser.add_argument("--plugin-turns", type=int, default=5, help="timed turns per size")
    parser.add_argument(
        "--plugin-hung-timeout-ms",
        type=int,
        default=10_000,
        help="the plugin's timeout in the hung-server turns (its default: 10000)",
    )
    parser.add_argument(
        "--plugin-source",
        default=None,
        help="directory holding another tree's clients/openclaw (a before figure)",
    )


def _plugin_dir(source: str | None, cache: Path) -> Path:
    if source is None:
        return PLUGIN_DIR
    plugin = Path(source).resolve()
    if not (plugin / "index.ts").exists():
        plugin = plugin / "clients" / "openclaw"
    link = plugin / "node_modules"
    if not link.exists():
        link.symlink_to(cache / "node_modules", target_is_directory=True)
    return plugin


def run(args: argparse.Namespace) -> None:
    env = provision()
    plugin = _plugin_dir(args.plugin_source, env.cache)
    work = Path(tempfile.mkdtemp(prefix="lcm-bench-plugin-"))
    try:
        (work / "home").mkdir()
        (work / "lcm").mkdir()
        serve = servers.start_serve({"LCM_HOME": str(work / "lcm")}, log=work / "serve.log")
        key = serve.printed_key()
        node_env = {**os.environ, "HOME": str(work / "home")}
        try:
            argv = [plugin, serve.base_url, key, args.plugin_sizes, args.plugin_turns, "bench"]
            rows = _drive(env.node, DRIVER, argv, node_env)
            hung_timeout = str(args.plugin_hung_timeout_ms)
            hung = _drive(env.node, HUNG, [plugin, serve.base_url, key, hung_timeout], node_env)
        finally:
            serve.stop()
        _report(rows, plugin)
        for row in hung:
            seconds = row["turn_seconds"]
            assert isinstance(seconds, list)
            print(
                f"hung server (plugin timeout {row['timeout_ms']:,} ms): a turn took"
                f" {seconds[0]:.1f} s, the next {seconds[1]:.1f} s"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _drive(
    node: Path, script: Path, argv: list[object], env: dict[str, str]
) -> list[dict[str, object]]:
    """Run a Node driver from the plugin's directory; the JSON lines it printed."""
    done = subprocess.run(
        [str(node), str(script), *map(str, argv)],
        cwd=PLUGIN_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if done.returncode != 0:
        raise SystemExit(f"{script.name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def _report(rows: list[dict[str, object]], plugin: Path) -> None:
    print(f"plugin: {plugin}; per turn, median (bootstrap, assemble x2, commit, afterTurn)")
    header = (
        f"{'messages':>9} {'bytes':>10} {'requests':>8} {'server ms':>9} {'plugin ms':>9}"
        f" | {'legacy ms':>9} {'host read ms':>12}"
    )
    print(header)
    for row in rows:
        lcm, legacy = row["lcm"], row["legacy"]
        assert isinstance(lcm, dict)
        assert isinstance(legacy, dict)
        legacy_ms = legacy["plugin_ms"] + legacy["host_read_ms"]
        print(
            f"{row['size']:>9,} {lcm['bytes']:>10,} {lcm['requests']:>8} {lcm['server_ms']:>9.1f}"
            f" {lcm['plugin_ms']:>9.1f} | {legacy_ms:>9.1f} {legacy['host_read_ms']:>12.1f}"
        )
        calls = lcm.get("by_call_ms") or {}
        assert isinstance(calls, dict)
        split = ", ".join(f"{name} {ms:.1f}" for name, ms in sorted(calls.items()))
        print(f"{'':>9} server ms by call: {split}; context {row.get('context_tokens')} tokens")
    if len(rows) >= 2:
        first, last = rows[0]["lcm"], rows[-1]["lcm"]
        assert isinstance(first, dict)
        assert isinstance(last, dict)
        bytes_ratio = last["bytes"] / max(1, first["bytes"])
        server_ratio = last["server_ms"] / max(0.001, first["server_ms"])
        print(
            f"{rows[-1]['size']:,} vs {rows[0]['size']:,} messages: bytes {bytes_ratio:.2f}x,"
            f" server time {server_ratio:.2f}x (goal: within 1.5x)"
        )

"""What a turn costs in model tokens: ``python -m bench cost``.

Replays the real sessions of ``../shared/data`` (a seeded synthetic session
without it) through a fresh ``lcm serve`` (SQLite, inline compaction, so a
turn's sweep has run before the next assemble) as a gateway does around each
model call: ``…/messages`` (the call's input), ``…/assemble`` (the request's
messages, 200k budget: a 200k-window model with the OpenClaw plugin's
default budget), ``…/turns`` (the reply). The summarizer is the fake
Messages API server (``tests/fakes``) writing summaries of about the length
the prompt asks for, with usage counts; the summarization tokens are what the
service recorded (``GET /v1/tenant/usage``, purpose ``summary``).

Each assembled request is compared with the previous one: the share that
repeats it from the start is what a provider's prompt cache can serve. The
same turns replayed under a single rolling summary (:mod:`bench.cost_model`)
are the baseline, in the same run. ``--cost-variant NAME:JSON`` replays once
more under a tenant override (e.g. ``prefix60k:{"summary_prefix_target_tokens": 60000}``).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from bench.cost_model import Replay, Rolling, rolling_replay, serialized
from bench.transcripts import DATA
from bench.workload import Step, steps_of, synthetic_steps
from lcm.db.engine import Database
from lcm.db.migrate import upgrade
from lcm.errors import InvalidInput
from lcm.settings import Settings
from lcm.tenants.service import create_tenant
from lcm.transcripts.parse import parse_transcript
from tests import servers
from tests.fakes import FakeAnthropicServer
from tests.fakes.anthropic_script import Behaviour, source_of

TOKEN_BUDGET = 200_000
_TARGET_RE = re.compile(r"at most about (\d+) tokens")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cost-budget", type=int, default=TOKEN_BUDGET, help="token budget (cost)")
    parser.add_argument(
        "--cost-keep-turns", type=int, default=20, help="turns a rolling summary keeps (cost)"
    )
    parser.add_argument(
        "--cost-turns", type=int, default=None, help="at most this many turns a session (cost)"
    )
    parser.add_argument(
        "--cost-variants-only",
        action="store_true",
        help="replay only the --cost-variant settings, not the defaults (cost)",
    )
    parser.add_argument(
        "--cost-csv", default=None, help="write every turn's figures to this CSV file (cost)"
    )
    parser.add_argument(
        "--cost-variant",
        action="append",
        default=[],
        help="NAME:JSON tenant settings replayed as well (cost), e.g. "
        'prefix60k:{"summary_prefix_target_tokens": 60000}',
    )


class SummaryLengthLLM(FakeAnthropicServer):
    """The fake Messages API answering each summary at about the length its prompt asks.

    The reply is the source's own words up to ~0.8 x the target (a model
    rarely fills the limit), at most a third of the source.
    """

    def __init__(self) -> None:
        super().__init__()
        self._body = threading.local()  # the request a handler thread is answering

    def _record(self, body: dict[str, Any], headers: dict[str, str]) -> int:
        self._body.value = body  # counted, not kept: a replay makes hundreds of calls
        return 0

    def _next_behaviour(self, model: str) -> Behaviour:
        body = self._body.value
        text = json.dumps(body.get("messages"))
        match = _TARGET_RE.search(text)
        target = int(match.group(1)) if match else 1_200
        words = source_of(body).split()
        keep = min(len(words) // 3, target * 4 * 8 // 10 // 6)  # ~6 chars a word
        summary = " ".join(words[: max(keep, 8)])
        return Behaviour.reply(f"{summary}\nExpand for details about: the span")


def sessions(limit: int | None = None) -> tuple[list[list[Step]], str]:
    """Each real session's model calls (in file order), or one synthetic session."""
    found: list[list[Step]] = []
    for path in sorted(DATA.rglob("*.jsonl")) if DATA.is_dir() else []:
        try:
            parsed = parse_transcript(path.read_bytes())
        except InvalidInput:
            continue
        steps = steps_of([(m.role, m.content) for m in parsed.messages])
        if steps:
            found.append(steps[:limit] if limit else steps)
    if found:
        return found, f"{len(found)} real sessions under {DATA}"
    return [synthetic_steps(1_600)], f"no sessions under {DATA}: one synthetic session"


def lcm_replay(
    http: httpx.Client, name: str, sessions: Sequence[Sequence[Step]], budget: int
) -> Replay:
    """Replay through the server; summarization tokens as ``/v1/tenant/usage`` records them."""
    replay = Replay(name)
    for number, steps in enumerate(sessions):
        replay.new_session()
        key = f"cost-{name}-{number}"
        sent, compacted = 0, False
        for step in steps:
            _post(http, f"/v1/conversations/{key}/messages", _batch(key, sent, step.inputs))
            sent += len(step.inputs)
            body = _post(http, f"/v1/conversations/{key}/assemble", {"token_budget": budget})
            replay.request(serialized(body["messages"]), compacted)
            turn = {**_batch(key, sent, step.outputs), "token_budget": budget}
            compacted = _post(http, f"/v1/conversations/{key}/turns", turn)["compaction"] == "ran"
            sent += len(step.outputs)
    usage = http.get("/v1/tenant/usage").json()
    for line in usage["by_purpose"]:
        if line["purpose"] == "summary":
            replay.summary_calls += line["calls"]
            replay.summary_input_tokens += line["input_tokens"]
            replay.summary_output_tokens += line["output_tokens"]
    return replay


def _batch(key: str, first: int, items: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
    messages = [
        {"role": role, "content": content, "id": f"{key}-{first + n}"}
        for n, (role, content) in enumerate(items)
    ]
    return {"messages": messages}


def _post(http: httpx.Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = http.post(path, json=body)
    response.raise_for_status()
    return dict(response.json())


def report(replays: Sequence[Replay], budget: int) -> None:
    """The cost table, then where each replay's prefix broke."""
    print(
        f"  {'replay':24} {'turns':>6} {'sum. in /1k turns':>18} {'sum. out /1k':>13} "
        f"{'calls /1k':>9} {'cacheable':>9} {'median':>7} {'mean req':>9} {'max req':>8}",
        flush=True,
    )
    for r in replays:
        print(
            f"  {r.name[:24]:24} {len(r.turns):>6} "
            f"{r.per_thousand(r.summary_input_tokens):>18,.0f} "
            f"{r.per_thousand(r.summary_output_tokens):>13,.0f} "
            f"{r.per_thousand(r.summary_calls):>9.1f} {r.overall_share():>9.1%} "
            f"{r.median_share():>7.1%} {r.mean_tokens():>9,.0f} {r.max_tokens():>8,}",
            flush=True,
        )
    print(f"  (budget {budget:,}; request tokens are the assembled messages only)", flush=True)
    print("  where the prefix broke: breaks per 1k turns, cached share at them, tokens lost")
    for r in replays:
        causes = []
        for cause in ("compaction", "thinking", "other"):
            n = len(r.breaks_by(cause))
            share = f"{r.mean_break_share(cause):.1%}" if n else "-"
            causes.append(
                f"{cause} {r.per_thousand(n):.1f} (cached {share}, lost {r.lost_share(cause):.2%})"
            )
        print(f"  {r.name[:24]:24} " + "; ".join(causes), flush=True)


def run(args: argparse.Namespace) -> None:
    steps, told = sessions(args.cost_turns)
    budget = args.cost_budget
    print(f"  {told}, {sum(map(len, steps))} turns, budget {budget:,}", flush=True)
    variants = [] if args.cost_variants_only else [("lcm (defaults)", "{}")]
    variants += [
        (name, overrides) for name, overrides in (v.split(":", 1) for v in args.cost_variant)
    ]
    workdir = servers.make_workdir()
    home = workdir / "home"
    home.mkdir()
    url = f"sqlite:///{home / 'lcm.db'}"
    upgrade(url)
    database = Database(Settings(database_url=url))
    with database.transaction() as session:
        keys = [create_tenant(session, f"cost-{n}").api_key for n in range(len(variants))]
    database.dispose()
    replays = [rolling_replay(steps, Rolling(budget, keep_turns=args.cost_keep_turns))]
    with SummaryLengthLLM() as llm:
        env = {
            "LCM_HOME": str(home),
            "LCM_COMPACTION_MODE": "inline",
            "ANTHROPIC_API_KEY": "bench",
            "LCM_ANTHROPIC_BASE_URL": llm.base_url,
        }
        serve = servers.start_serve(env, log=workdir / "serve.log")
        try:
            for key, (name, overrides) in zip(keys, variants, strict=True):
                auth = {"Authorization": f"Bearer {key}"}
                with httpx.Client(base_url=serve.base_url, headers=auth, timeout=600) as http:
                    if json.loads(overrides):
                        patched = http.patch("/v1/tenant/settings", json=json.loads(overrides))
                        patched.raise_for_status()
                    replays.append(lcm_replay(http, name, steps, budget))
        finally:
            serve.stop()
            shutil.rmtree(workdir, ignore_errors=True)
    report(replays, budget)
    if args.cost_csv:
        header = "replay,session,turn,tokens,cacheable_tokens,broke,compacted,cause"
        rows = [header, *(row for r in replays for row in r.csv_rows())]
        Path(args.cost_csv).write_text("\n".join(rows) + "\n")
        print(f"  every turn: {args.cost_csv}", flush=True)

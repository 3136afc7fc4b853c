"""The load ``bench gateway`` replays: agent turns, the fake model, and the targets they hit.

Turns come from real sessions in ``../shared/data`` (their message sizes and
tool pairs) or, without it, from a seeded synthetic session. Each simulated
conversation runs what a gateway does around one model call (ingest,
assemble, after-turn) against a :class:`Target`: the lcm-server deployment
through ``lcm_client``, or the minimal reference endpoint.
"""

from __future__ import annotations

import asyncio
import math
import random
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx

from bench.transcripts import DATA
from lcm.errors import InvalidInput
from lcm.transcripts.parse import parse_transcript
from lcm_client import NO_RETRIES, AsyncLcmClient, LcmClientError
from lcm_client.models import AssembleIn, MessageIn, MessagesIn, TurnIn
from tests.fakes import FakeAnthropicServer
from tests.fakes.anthropic_script import Behaviour

TOKEN_BUDGET = 24_000
LLM_P50, LLM_P99 = 1.5, 6.0
ENDPOINTS = ("ingest", "assemble", "turns")


# --- the turns replayed ---------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One model call: the messages sent to it (new since the last) and its reply."""

    inputs: tuple[tuple[str, Any], ...]
    outputs: tuple[tuple[str, Any], ...]


def steps_of(messages: list[tuple[str, Any]]) -> list[Step]:
    """Split a session into model calls: inputs (user/tool) then the reply (assistant)."""
    steps: list[Step] = []
    inputs: list[tuple[str, Any]] = []
    outputs: list[tuple[str, Any]] = []
    for role, content in messages:
        if role == "assistant":
            outputs.append((role, content))
            continue
        if outputs:
            steps.append(Step(tuple(inputs), tuple(outputs)))
            inputs, outputs = [], []
        inputs.append((role, content))
    if inputs and outputs:
        steps.append(Step(tuple(inputs), tuple(outputs)))
    return [s for s in steps if s.inputs]


def real_steps(data: Path = DATA) -> list[Step]:
    """The model calls of every parseable session under ``data`` (empty when absent)."""
    steps: list[Step] = []
    for path in sorted(data.rglob("*.jsonl")) if data.is_dir() else []:
        try:
            parsed = parse_transcript(path.read_bytes())
        except InvalidInput:
            continue
        steps.extend(steps_of([(m.role, m.content) for m in parsed.messages]))
    return steps


def synthetic_steps(count: int = 400, seed: int = 7) -> list[Step]:
    """Sessions shaped like the real ones: a prompt or tool results in, a tool call out."""
    rng = random.Random(seed)
    steps = []
    for n in range(count):
        call_id = f"toolu_syn_{n}"
        size = int(rng.lognormvariate(math.log(300), 1.2))
        words = " ".join(f"w{rng.randrange(5000)}" for _ in range(max(1, size // 6)))
        if n % 5 == 0:
            inputs: tuple[tuple[str, Any], ...] = (("user", f"please look at module {n}: {words}"),)
        else:
            result = {"type": "tool_result", "tool_use_id": f"toolu_syn_{n - 1}", "content": words}
            inputs = (("user", [result]),)
        reply = [
            {"type": "text", "text": f"Reading lib/module_{n}.py next."},
            {"type": "tool_use", "id": call_id, "name": "Read", "input": {"path": f"lib/m{n}.py"}},
        ]
        steps.append(Step(inputs, (("assistant", reply),)))
    return steps


# --- the model --------------------------------------------------------------------


class ModelLikeLLM(FakeAnthropicServer):
    """The fake Messages API with a lognormal reply time, counting calls in flight."""

    def __init__(self, p50: float = LLM_P50, p99: float = LLM_P99, seed: int = 11) -> None:
        super().__init__()
        self._mu = math.log(p50)
        self._sigma = math.log(p99 / p50) / 2.326  # z of the 99th percentile
        self._rng = random.Random(seed)
        self._gauge = threading.Lock()  # handler threads update the counters together
        self.in_flight = 0
        self.calls = 0

    def _next_behaviour(self, model: str) -> Behaviour:
        with self._gauge:
            delay = self._rng.lognormvariate(self._mu, self._sigma)
        return Behaviour.ok(delay=min(delay, 30.0))

    def _record(self, body: dict[str, Any], headers: dict[str, str]) -> int:
        # Counted, not kept: a long run would hold every prompt in memory.
        with self._gauge:
            self.calls += 1
            return self.calls

    def respond(
        self, body: dict[str, Any], headers: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        with self._gauge:
            self.in_flight += 1
        try:
            return super().respond(body, headers)
        finally:
            with self._gauge:
                self.in_flight -= 1


# --- the load ---------------------------------------------------------------------


class Target(Protocol):
    """The three calls of a turn, against lcm-server or the reference."""

    async def ingest(self, tenant: int, key: str, messages: list[MessageIn]) -> int: ...
    async def assemble(self, tenant: int, key: str) -> None: ...
    async def turn(self, tenant: int, key: str, messages: list[MessageIn]) -> int: ...
    async def close(self) -> None: ...


class LcmTarget:
    def __init__(self, base_url: str, keys: list[str], token_budget: int) -> None:
        self.token_budget = token_budget
        # No retries: a 429/503 here is an error the run must report, not hide.
        self.clients = [AsyncLcmClient(base_url, key, retry=NO_RETRIES) for key in keys]

    async def ingest(self, tenant: int, key: str, messages: list[MessageIn]) -> int:
        out = await self.clients[tenant].ingest(key, MessagesIn(messages=messages))
        return out.ingested

    async def assemble(self, tenant: int, key: str) -> None:
        await self.clients[tenant].assemble(key, AssembleIn(token_budget=self.token_budget))

    async def turn(self, tenant: int, key: str, messages: list[MessageIn]) -> int:
        body = TurnIn(messages=messages, token_budget=self.token_budget)
        return (await self.clients[tenant].turn(key, body)).ingested

    async def close(self) -> None:
        for client in self.clients:
            await client.aclose()


class ReferenceTarget:
    def __init__(self, base_url: str, tenants: int, token_budget: int) -> None:
        self.token_budget = token_budget
        self.http = httpx.AsyncClient(base_url=base_url, timeout=60)
        self.tokens = [f"Bearer reference-tenant-{n:04d}" for n in range(tenants)]

    async def _post(self, tenant: int, path: str, body: dict[str, Any]) -> dict[str, Any]:
        r = await self.http.post(path, json=body, headers={"authorization": self.tokens[tenant]})
        r.raise_for_status()
        return dict(r.json())

    async def ingest(self, tenant: int, key: str, messages: list[MessageIn]) -> int:
        body = MessagesIn(messages=messages).model_dump(exclude_none=True)
        return int(
            (await self._post(tenant, f"/v1/conversations/{key}/messages", body))["ingested"]
        )

    async def assemble(self, tenant: int, key: str) -> None:
        await self._post(
            tenant, f"/v1/conversations/{key}/assemble", {"token_budget": self.token_budget}
        )

    async def turn(self, tenant: int, key: str, messages: list[MessageIn]) -> int:
        body = TurnIn(messages=messages, token_budget=self.token_budget).model_dump(
            exclude_none=True
        )
        return int((await self._post(tenant, f"/v1/conversations/{key}/turns", body))["ingested"])

    async def close(self) -> None:
        await self.http.aclose()


@dataclass(frozen=True)
class Load:
    tenants: int = 4
    conversations: int = 4  # per tenant, each one turn at a time
    seconds: float = 25.0
    rate: float | None = None  # turns/s over all conversations; None: flat out
    token_budget: int = TOKEN_BUDGET  # of every assemble and after-turn


@dataclass
class Drive:
    """What the clients saw."""

    seconds: float = 0.0
    turns: int = 0
    messages: int = 0
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: Counter[str] = field(default_factory=Counter)
    sent: dict[tuple[int, str], int] = field(default_factory=lambda: defaultdict(int))


def _messages(key: str, first: int, items: tuple[tuple[str, Any], ...]) -> list[MessageIn]:
    return [
        MessageIn(role=role, content=content, id=f"{key}-{first + n}")
        for n, (role, content) in enumerate(items)
    ]


async def _conversation(
    target: Target, tenant: int, key: str, steps: list[Step], offset: int, load: Load, drive: Drive
) -> None:
    deadline = time.perf_counter() + load.seconds
    interval = load.tenants * load.conversations / load.rate if load.rate else 0.0
    next_at = time.perf_counter()
    n, stored = offset, 0
    while time.perf_counter() < deadline:
        step = steps[n % len(steps)]
        n += 1
        name = "ingest"
        try:
            started = time.perf_counter()
            accepted = await target.ingest(tenant, key, _messages(key, stored, step.inputs))
            drive.sent[(tenant, key)] += accepted
            drive.latencies[name].append((time.perf_counter() - started) * 1000)
            name = "assemble"
            started = time.perf_counter()
            await target.assemble(tenant, key)
            drive.latencies[name].append((time.perf_counter() - started) * 1000)
            name = "turns"
            started = time.perf_counter()
            replies = _messages(key, stored + len(step.inputs), step.outputs)
            replied = await target.turn(tenant, key, replies)
            drive.sent[(tenant, key)] += replied
            drive.latencies[name].append((time.perf_counter() - started) * 1000)
        except (LcmClientError, httpx.HTTPError) as exc:
            drive.errors[f"{name}: {type(exc).__name__}: {str(exc)[:120]}"] += 1
            return  # the conversation's ids would be out of step: stop it
        drive.messages += accepted + replied
        stored += len(step.inputs) + len(step.outputs)
        drive.turns += 1
        if interval:
            next_at += interval
            await asyncio.sleep(max(0.0, next_at - time.perf_counter()))


async def drive_load(target: Target, steps: list[Step], load: Load) -> Drive:
    drive = Drive()
    rng = random.Random(3)
    started = time.perf_counter()
    await asyncio.gather(
        *(
            _conversation(target, t, f"gw-t{t}-c{c}", steps, rng.randrange(len(steps)), load, drive)
            for t in range(load.tenants)
            for c in range(load.conversations)
        )
    )
    drive.seconds = time.perf_counter() - started
    await target.close()
    return drive

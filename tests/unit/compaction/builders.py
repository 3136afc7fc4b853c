"""In-memory conversations for planning and assembly tests.

``Conversation`` builds context entries the way ingest and the database do
(parts from blocks, growing ordinals with gaps); ``InMemoryCompactor`` applies
a pass the way the engine does (one summary entry replaces a contiguous range
at its first ordinal) with fake summaries of bounded size, and remembers the
DAG links so tests can walk back to every source message.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import strategies as st

from lcm.assembly import summary_context_tokens
from lcm.compaction.planning import PassPlan
from lcm.compaction.sweep import ChainPosition, next_pass, plan_after_pass
from lcm.context import ContextEntry, MessageView, PartView, Role, SummaryView, context_tokens
from lcm.policy.fresh_tail import fresh_tail_start
from lcm.settings import CompactionSettings
from lcm.tokens import estimate_tokens

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def settings(**overrides: Any) -> CompactionSettings:
    return CompactionSettings(**overrides)


def part_for(block: dict[str, Any]) -> PartView:
    """A stored part for ``block``, as ingest would derive it."""
    kind = block["type"]
    call_id = block.get("id") if kind == "tool_use" else block.get("tool_use_id")
    if kind == "text":
        text = block["text"]
    elif kind == "thinking":
        text = block["thinking"]
    elif kind == "tool_use":
        text = f"[tool_use {block['name']}] {json.dumps(block.get('input', {}))}"
    elif kind == "tool_result":
        content = block.get("content", "")
        text = content if isinstance(content, str) else json.dumps(content)
    else:
        text = f"[{kind}]"
    return PartView(kind, block, call_id, text)


@dataclass
class Conversation:
    entries: list[ContextEntry] = field(default_factory=list)
    messages: list[MessageView] = field(default_factory=list)
    next_ordinal: int = 1

    def add(
        self,
        role: Role,
        content: str | list[dict[str, Any]],
        *,
        tokens: int | None = None,
        parts: tuple[PartView, ...] | None = None,
    ) -> ContextEntry:
        seq = len(self.messages) + 1
        if isinstance(content, str):
            text, shape = content, "text"
            stored = parts if parts is not None else (part_for({"type": "text", "text": text}),)
        else:
            stored = tuple(part_for(block) for block in content)
            text, shape = "\n".join(p.text for p in stored if p.text), "blocks"
        message = MessageView(
            id=1000 + seq,
            seq=seq,
            role=role,
            content=text,
            created_at=T0 + timedelta(minutes=seq),
            parts=stored,
            content_shape=shape,  # type: ignore[arg-type]
        )
        count = estimate_tokens(text) if tokens is None else tokens
        entry = ContextEntry(ordinal=self.next_ordinal, token_count=count, message=message)
        # Ordinals only grow and have gaps, like the database's.
        self.next_ordinal += 1 + seq % 3
        self.messages.append(message)
        self.entries.append(entry)
        return entry

    def user(self, text: str = "hi", **kw: Any) -> ContextEntry:
        return self.add("user", text, **kw)

    def assistant(self, text: str = "ok", **kw: Any) -> ContextEntry:
        return self.add("assistant", text, **kw)

    def tool_call(self, *call_ids: str, text: str = "", **kw: Any) -> ContextEntry:
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        blocks += [
            {"type": "tool_use", "id": c, "name": "read", "input": {"path": c}} for c in call_ids
        ]
        return self.add("assistant", blocks, **kw)

    def tool_result(self, *call_ids: str, output: str = "done", **kw: Any) -> ContextEntry:
        blocks = [{"type": "tool_result", "tool_use_id": c, "content": output} for c in call_ids]
        return self.add("user", blocks, **kw)

    def exchanges(self, count: int, tokens: int = 10) -> None:
        """``count`` messages alternating user / assistant, ``tokens`` each."""
        for i in range(count):
            (self.user if i % 2 == 0 else self.assistant)(f"m{i}", tokens=tokens)


def summary_entry(
    ordinal: int,
    depth: int = 0,
    *,
    tokens: int = 100,
    sid: str | None = None,
    parents: tuple[str, ...] = (),
    content: str = "summary text",
) -> ContextEntry:
    summary = SummaryView(
        id=sid or f"sum_{ordinal:016x}",
        kind="leaf" if depth == 0 else "condensed",
        depth=depth,
        content=content,
        token_count=estimate_tokens(content),
        earliest_at=T0,
        latest_at=T0 + timedelta(hours=1),
        descendant_count=4,
        parent_ids=parents,
    )
    return ContextEntry(ordinal=ordinal, token_count=tokens, summary=summary)


class InMemoryCompactor:
    """Runs passes against a ``Conversation`` like the engine runs them against rows."""

    def __init__(
        self, conversation: Conversation, config: CompactionSettings, summary_chars: int = 200
    ) -> None:
        self.conversation = conversation
        self.config = config
        self.summary_chars = summary_chars
        self.leaf_sources: dict[str, tuple[int, ...]] = {}
        self.summaries: dict[str, SummaryView] = {}
        self.applied: list[PassPlan] = []

    def __call__(self, plan: PassPlan) -> list[ContextEntry]:
        entries = self.conversation.entries
        start = entries.index(plan.entries[0])
        stop = start + len(plan.entries)
        assert tuple(entries[start:stop]) == plan.entries, "a pass must cover a contiguous range"
        assert stop <= fresh_tail_start(entries, self.config), "a pass touched the fresh tail"
        summary = self._summarize(plan)
        self.summaries[summary.id] = summary
        entry = ContextEntry(
            ordinal=plan.first_ordinal,
            token_count=summary_context_tokens(summary),
            summary=summary,
        )
        self.conversation.entries = [*entries[:start], entry, *entries[stop:]]
        self.applied.append(plan)
        return list(self.conversation.entries)

    def _summarize(self, plan: PassPlan) -> SummaryView:
        sid = f"sum_{len(self.summaries) + 1:016x}"
        times: list[datetime] = []
        descendants = 0
        for e in plan.entries:
            if e.message is not None:
                times.append(e.message.created_at)
                descendants += 1
            elif e.summary is not None:
                times += [e.summary.earliest_at, e.summary.latest_at]
                descendants += e.summary.descendant_count + 1
        if plan.kind == "leaf":
            self.leaf_sources[sid] = plan.message_ids
        # Fake content of a fixed, bounded size: exactly summary_chars characters.
        head = f"{plan.kind} d{plan.depth} of {len(plan.entries)} <&> 数据 "
        content = (head + "lorem " * self.summary_chars)[: self.summary_chars]
        return SummaryView(
            id=sid,
            kind=plan.kind,
            depth=plan.depth,
            content=content,
            token_count=estimate_tokens(content),
            earliest_at=min(times),
            latest_at=max(times),
            descendant_count=descendants,
            parent_ids=plan.summary_ids,
        )

    def reachable_message_ids(self, entries: list[ContextEntry]) -> list[int]:
        """Source messages reachable from ``entries`` through the DAG, in context order."""
        found: list[int] = []

        def walk(summary_id: str) -> None:
            if summary_id in self.leaf_sources:
                found.extend(self.leaf_sources[summary_id])
            for parent in self.summaries[summary_id].parent_ids:
                walk(parent)

        for e in entries:
            if e.message is not None:
                found.append(e.message.id)
            elif e.summary is not None:
                walk(e.summary.id)
        return found


# --- hypothesis: random conversations ---------------------------------------

_WORDS = ["alpha ", "deploy ", "数据库", "テスト", "검색 ", "x<y & z ", "\n", "a"]


@st.composite
def texts(draw: st.DrawFn, max_pieces: int = 400) -> str:
    """Short or long text, Latin or CJK; built from pieces so long text is cheap."""
    pieces = draw(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=12))
    repeat = draw(st.sampled_from([1, 1, 1, 5, 40, max_pieces]))
    return "".join(pieces) * repeat


@dataclass(frozen=True)
class TurnSpec:
    """One user turn: a prompt, tool steps, maybe a final answer."""

    prompt: str
    steps: tuple[tuple[int, str, bool, str], ...]  # calls, result style, thinking, output
    answer: str | None
    system_note: str | None


@st.composite
def turns(draw: st.DrawFn) -> TurnSpec:
    steps = draw(
        st.lists(
            st.tuples(
                st.integers(1, 2),
                st.sampled_from(["blocks", "blocks", "tool_role", "missing"]),
                st.booleans(),
                texts(),
            ),
            max_size=3,
        )
    )
    answer = draw(st.one_of(st.none(), texts()))
    note = draw(st.one_of(st.none(), st.none(), st.just("policy: be brief")))
    return TurnSpec(draw(texts()), tuple(steps), answer, note)


def add_turn(conversation: Conversation, spec: TurnSpec) -> None:
    """Append one generated turn, with the tool-call shapes gateways send."""
    if spec.system_note:
        conversation.add("system", spec.system_note)
    conversation.user(spec.prompt)
    for calls, style, thinking, output in spec.steps:
        base = f"t{len(conversation.messages)}"
        ids = [f"{base}_{i}" for i in range(calls)]
        blocks: list[dict[str, Any]] = []
        if thinking:
            blocks.append({"type": "thinking", "thinking": "hmm", "signature": "sig"})
        blocks += [{"type": "tool_use", "id": c, "name": "read", "input": {"q": c}} for c in ids]
        conversation.add("assistant", blocks)
        if style == "blocks":
            conversation.tool_result(*ids, output=output)
        elif style == "tool_role":
            for c in ids:
                part = PartView("text", {"type": "text", "text": output}, c, output)
                conversation.add("tool", output, parts=(part,))
        # "missing": the gateway never sent the results.
    if spec.answer is not None:
        conversation.assistant(spec.answer)


@dataclass(frozen=True)
class ChainRun:
    """A sweep chain driven in memory by the production decisions."""

    entries: tuple[ContextEntry, ...]
    passes: tuple[PassPlan, ...]
    rounds: int
    tokens_before: int
    tokens_after: int
    stop: str  # "no_savings": the last pass saved nothing; "done": nothing left or under target


def drive_chain(
    entries: list[ContextEntry],
    config: CompactionSettings,
    budget: int,
    run_pass: Callable[[PassPlan], list[ContextEntry]],
    *,
    target_tokens: int | None = None,
) -> ChainRun:
    """Run a chain the way ``CompactionJobs`` does, one "job" per loop turn.

    The first job asks ``next_pass``; each later one ``plan_after_pass``,
    exactly the two functions the worker's jobs call; only the database and
    the queue are replaced by ``run_pass`` and this loop.
    """
    current = list(entries)
    start = context_tokens(current)
    position = ChainPosition.start(current)
    plan = next_pass(current, config, budget, target_tokens=target_tokens)
    passes: list[PassPlan] = []
    saved_nothing = False
    while plan is not None:
        passes.append(plan)
        before = context_tokens(current)
        current = list(run_pass(plan))
        saved_nothing = context_tokens(current) >= before
        plan, position = plan_after_pass(
            before, current, config, budget, position, target_tokens=target_tokens
        )
    stop = "no_savings" if saved_nothing else "done"
    return ChainRun(
        tuple(current), tuple(passes), position.round, start, context_tokens(current), stop
    )

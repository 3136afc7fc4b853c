"""Making a list of turns valid for the Anthropic Messages API.

Stored conversations are not always well formed, and assembly makes them less
so: eviction and summarization can cut a tool call from its result. The rules,
applied in this order:

1. **Alternation.** Consecutive turns of one role are merged by
   concatenating their blocks (asked for times: the merged turn covers
   theirs, from the earliest to the latest).
2. **Thinking.** Only the last assistant message keeps thinking blocks: the
   API needs them there to continue an agent loop, and ignores (or may reject)
   them in older turns. Even there a ``thinking`` block without a signature is
   dropped (the API cannot verify it), and the kept ones are moved to the front
   of the message, where the API expects them. A message left empty is
   dropped and its neighbours merged.
3. **Tool pairing.** A ``tool_result`` is kept only if its ``tool_use`` is in
   the immediately preceding assistant message (first result per call id);
   any other becomes a text block that keeps its output readable. A
   ``tool_use`` whose result is missing from the next user message gets a
   synthetic ``tool_result`` with ``is_error: true`` and a short note: removing
   the call instead would leave the assistant's own words referring to
   nothing. A trailing assistant message is left alone: its results may still
   be on their way from the gateway's tool runner.
4. **Result order.** In a user message, ``tool_result`` blocks come first.
5. **First message.** If the context opens with an assistant message, a short
   placeholder user message is put before it (dropping the assistant message
   would lose words the model wrote, perhaps in the fresh tail); it has the
   times of that message.

The normalizer counts the tokens of the text it adds, so the assembler's
estimate covers them; text it removes is not subtracted (a safe overestimate).
"""

from __future__ import annotations

from typing import Any

from lcm.assembly.render import (
    ASSISTANT_BLOCK_TYPES,
    USER_BLOCK_TYPES,
    TimeSpan,
    Turn,
    is_blank_text,
    text_block,
)
from lcm.tokens import estimate_tokens

PLACEHOLDER_TEXT = "[Conversation continues from earlier context.]"
MISSING_RESULT_TEXT = "[No result was recorded for this tool call.]"
_THINKING = frozenset({"thinking", "redacted_thinking"})


class _Normalizer:
    def __init__(self, times: bool) -> None:
        self.added_tokens = 0
        self.times = times

    def text(self, text: str) -> dict[str, Any]:
        self.added_tokens += estimate_tokens(text)
        return text_block(text)

    def run(self, turns: list[Turn]) -> list[Turn]:
        merged = _merge(turns, self.times)
        turns = _filter_thinking(merged)
        if len(turns) < len(merged):  # a turn left empty went: its neighbours may share a role
            turns = _merge(turns, self.times)
        self._pair_tools(turns)
        for turn in turns:
            if turn.role == "user":
                turn.blocks.sort(key=lambda b: b.get("type") != "tool_result")  # stable
        last = _last_assistant(turns)
        if last is not None:
            last.blocks.sort(key=lambda b: b.get("type") not in _THINKING)  # stable
        if turns and turns[0].role == "assistant":
            # The placeholder stands for nothing of its own: it has the times
            # of the message it opens the context for.
            turns.insert(0, Turn("user", [self.text(PLACEHOLDER_TEXT)], turns[0].span))
        return turns

    def _pair_tools(self, turns: list[Turn]) -> None:
        for index, turn in enumerate(turns):
            if turn.role != "user":
                continue
            before = turns[index - 1] if index > 0 else None
            uses = tool_use_ids(before) if before is not None else []
            if not uses and not any(b.get("type") == "tool_result" for b in turn.blocks):
                continue  # no call to answer and no result to check: nothing changes
            offered = set(uses)
            answered: set[str] = set()
            blocks: list[dict[str, Any]] = []
            for block in turn.blocks:
                call_id = block.get("tool_use_id") if block.get("type") == "tool_result" else None
                if call_id is None:
                    blocks.append(block)
                elif call_id in offered and call_id not in answered:
                    answered.add(call_id)
                    blocks.append(block)
                else:
                    blocks.append(self._orphan_result_text(block))
            turn.blocks = blocks
            turn.blocks[:0] = [
                self._missing_result(call_id)
                for call_id in dict.fromkeys(uses)
                if call_id not in answered
            ]

    def _missing_result(self, call_id: str) -> dict[str, Any]:
        self.added_tokens += estimate_tokens(MISSING_RESULT_TEXT) + 1
        return {
            "type": "tool_result",
            "tool_use_id": call_id,
            "is_error": True,
            "content": MISSING_RESULT_TEXT,
        }

    def _orphan_result_text(self, block: dict[str, Any]) -> dict[str, Any]:
        note = f"[Output of tool call {block.get('tool_use_id')}; the call is not in context]"
        if block.get("is_error"):
            note += " (error)"
        self.added_tokens += estimate_tokens(note) + 1
        return text_block(f"{note}\n{_result_text(block.get('content'))}".rstrip())


def normalize_turns(turns: list[Turn]) -> tuple[list[dict[str, Any]], int]:
    """Messages the API accepts, and the tokens the repairs added."""
    normalized, added = normalized_turns(turns)
    return provider_messages(normalized), added


def normalized_turns(turns: list[Turn], *, times: bool = False) -> tuple[list[Turn], int]:
    """The turns of :func:`normalize_turns`'s messages, one each, and the tokens added.

    ``turns`` is left as it was: the first merge copies every turn, and every
    later step works on those copies. With ``times``, each turn's ``span`` is
    the times of the turns it was made of; without, a merged turn's is None
    (working it out made normalizing a context where every third turn merges
    ~28% slower).
    """
    normalizer = _Normalizer(times)
    return normalizer.run(turns), normalizer.added_tokens


def provider_messages(turns: list[Turn]) -> list[dict[str, Any]]:
    """The turns as Messages API messages (sharing their block lists)."""
    return [{"role": turn.role, "content": turn.blocks} for turn in turns]


def tool_use_ids(turn: Turn) -> list[str]:
    if turn.role != "assistant":
        return []
    return [
        block["id"]
        for block in turn.blocks
        if block.get("type") == "tool_use" and isinstance(block.get("id"), str)
    ]


def _merge(turns: list[Turn], times: bool) -> list[Turn]:
    merged: list[Turn] = []
    for turn in turns:
        if merged and merged[-1].role == turn.role:
            last = merged[-1]  # a copy made below: changed in place, never the input
            last.blocks.extend(turn.blocks)
            last.span = _spanning(last.span, turn.span) if times else None
        else:
            merged.append(Turn(turn.role, list(turn.blocks), turn.span))
    return merged


def _spanning(first: TimeSpan | None, second: TimeSpan | None) -> TimeSpan | None:
    """The times two merged turns cover together."""
    if first is None or second is None:
        return first or second
    return (min(first[0], second[0]), max(first[1], second[1]))


def _filter_thinking(turns: list[Turn]) -> list[Turn]:
    last = _last_assistant(turns)
    kept: list[Turn] = []
    for turn in turns:
        if turn.role == "assistant":
            keep_signed = turn is last
            turn.blocks = [
                b
                for b in turn.blocks
                if b.get("type") not in _THINKING or (keep_signed and _is_signed(b))
            ]
        if turn.blocks:
            kept.append(turn)
    return kept


def _is_signed(block: dict[str, Any]) -> bool:
    if block.get("type") == "redacted_thinking":
        return bool(block.get("data"))
    return bool(block.get("signature"))


def _last_assistant(turns: list[Turn]) -> Turn | None:
    return next((t for t in reversed(turns) if t.role == "assistant"), None)


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        pieces = []
        for inner in content:
            if isinstance(inner, dict) and inner.get("type") == "text":
                pieces.append(str(inner.get("text", "")))
            elif isinstance(inner, dict):
                pieces.append(f"[{inner.get('type', 'block')}]")
        return "\n".join(pieces)
    return ""


def api_violations(messages: list[dict[str, Any]]) -> list[str]:
    """What the Messages API would refuse in ``messages`` (empty when valid).

    The checks mirror the rules above. The assembler's output is meant to
    pass them all; callers may use this to guard or alert, and tests do.
    A trailing assistant message may still await its tool results.
    """
    problems: list[str] = []
    for index, message in enumerate(messages):
        role, blocks = message.get("role"), message.get("content")
        where = f"messages[{index}]"
        expected = "user" if index % 2 == 0 else "assistant"
        if role != expected:
            problems.append(f"{where}: role {role!r}, expected {expected!r}")
        if not isinstance(blocks, list) or not blocks:
            problems.append(f"{where}: content must be a non-empty list of blocks")
            continue
        problems += [f"{where}: blank text block" for b in blocks if is_blank_text(b)]
        allowed = ASSISTANT_BLOCK_TYPES if role == "assistant" else USER_BLOCK_TYPES
        problems += [
            f"{where}: {b.get('type')!r} block not allowed for {role}"
            for b in blocks
            if b.get("type") not in allowed
        ]
        if role == "user":
            problems += _user_pairing_violations(messages, index, where)
        elif index + 1 < len(messages):
            answered = {
                b.get("tool_use_id")
                for b in messages[index + 1].get("content") or []
                if b.get("type") == "tool_result"
            }
            problems += [
                f"{where}: tool_use {call_id} has no tool_result in the next message"
                for call_id in _ids(blocks, "tool_use", "id")
                if call_id not in answered
            ]
        problems += _thinking_violations(messages, index, blocks, where)
    return problems


def _user_pairing_violations(messages: list[dict[str, Any]], index: int, where: str) -> list[str]:
    blocks = messages[index]["content"]
    problems: list[str] = []
    types = [b.get("type") for b in blocks]
    results = types.count("tool_result")
    if types[:results] != ["tool_result"] * results:
        problems.append(f"{where}: tool_result blocks must come first")
    offered = set()
    if index > 0 and messages[index - 1].get("role") == "assistant":
        offered = set(_ids(messages[index - 1].get("content") or [], "tool_use", "id"))
    seen: set[str] = set()
    for call_id in _ids(blocks, "tool_result", "tool_use_id"):
        if call_id not in offered:
            problems.append(f"{where}: tool_result {call_id} has no tool_use just before")
        if call_id in seen:
            problems.append(f"{where}: tool_result {call_id} answered twice")
        seen.add(call_id)
    return problems


def _thinking_violations(
    messages: list[dict[str, Any]], index: int, blocks: list[dict[str, Any]], where: str
) -> list[str]:
    types = [b.get("type") for b in blocks]
    thinking = sum(1 for t in types if t in _THINKING)
    if not thinking:
        return []
    later_assistant = any(m.get("role") == "assistant" for m in messages[index + 1 :])
    if messages[index].get("role") != "assistant" or later_assistant:
        return [f"{where}: thinking blocks outside the last assistant message"]
    if any(t not in _THINKING for t in types[:thinking]):
        return [f"{where}: thinking blocks must come first"]
    return []


def _ids(blocks: list[dict[str, Any]], block_type: str, key: str) -> list[str]:
    return [str(b.get(key)) for b in blocks if b.get("type") == block_type]

"""The expand-query loop over an OpenAI-compatible server: a tool-calling adapter.

The loop (:mod:`lcm.retrieval.expand_query`) speaks in Messages API shapes:
tools with an ``input_schema``, assistant turns of ``text``/``tool_use``
blocks, user turns of ``tool_result`` blocks. :class:`ChatExpansionLlm`
translates each call to chat completions (function tools, ``tool_calls``,
``tool`` messages) and reads the reply back into the same shapes, so the
loop, its grant and its reading budget stay one piece of code.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from lcm.errors import SummarizerError
from lcm.summarize import OpenAiClients, chat_completion


@dataclass(frozen=True, slots=True)
class Block:
    """A content block as the loop reads it (``text`` or ``tool_use``)."""

    type: str
    text: str = ""
    id: str = ""
    name: str = ""
    input: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TokenUsage:
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class Reply:
    """A chat completion in the shape of a Messages API reply."""

    content: list[Block]
    model: str
    usage: TokenUsage


@dataclass(frozen=True)
class ChatExpansionLlm:
    """The process's OpenAI-compatible connection and the model this loop uses."""

    llm: OpenAiClients
    model: str
    provider: str = "openai"

    def create(self, **kwargs: Any) -> Reply:
        """One turn: the loop's Messages API arguments (``max_tokens``, ``system``,
        ``messages``, ``tools``, ``tool_choice``, optionally ``timeout``) as a chat completion."""
        import openai

        breaker = self.llm.breakers.for_model(self.model)
        breaker.before_call()
        try:
            reply = chat_completion(
                self.llm,
                self.model,
                max_tokens=kwargs["max_tokens"],
                messages=chat_messages(kwargs["system"], kwargs["messages"]),
                tools=[chat_tool(t) for t in kwargs["tools"]],
                tool_choice=kwargs["tool_choice"]["type"],  # "auto" or "none"
                # The loop's deadline: the SDK's per-request timeout.
                **({"timeout": kwargs["timeout"]} if "timeout" in kwargs else {}),
            )
        except (openai.OpenAIError, ValueError) as exc:
            breaker.record_failure()
            raise SummarizerError(f"expand-query model call failed: {exc}") from exc
        except BaseException:
            breaker.record_failure()  # never leave a half-open trial unresolved
            raise
        breaker.record_success()
        content = [Block("text", text=reply.text)] if reply.text else []
        content += [
            Block("tool_use", id=c.id, name=c.name, input=_arguments(c.arguments))
            for c in reply.tool_calls
        ]
        return Reply(content, reply.model, TokenUsage(reply.input_tokens, reply.output_tokens))


def chat_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """A Messages API tool as a chat-completions function tool."""
    return {
        "type": "function",
        "function": {
            "name": tool["name"],
            "description": tool.get("description", ""),
            "parameters": tool["input_schema"],
        },
    }


def chat_messages(system: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The loop's conversation as chat messages: the system prompt first, tool results apart."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            out.append({"role": message["role"], "content": content})
        elif message["role"] == "assistant":
            out.append(_assistant(content))
        else:
            out.extend(
                {"role": "tool", "tool_call_id": b["tool_use_id"], "content": b["content"]}
                for b in content
                if b.get("type") == "tool_result"
            )
    return out


def _assistant(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
    calls = [
        {
            "id": b["id"],
            "type": "function",
            "function": {"name": b["name"], "arguments": json.dumps(b["input"])},
        }
        for b in blocks
        if b.get("type") == "tool_use"
    ]
    turn: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        turn["tool_calls"] = calls
    return turn


def _arguments(raw: str) -> dict[str, Any]:
    """A tool call's JSON arguments; anything else is no arguments (the tool then says so)."""
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}

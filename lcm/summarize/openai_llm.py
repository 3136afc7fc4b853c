"""The process's OpenAI-compatible connection and one chat completion through it.

Any server speaking the chat-completions API: hosted OpenAI, or a local model
behind vLLM, Ollama or llama.cpp's server (``LCM_OPENAI_BASE_URL``). Built
once by the composition root (:mod:`lcm.services`) like the Anthropic client,
with breakers of its own: a local server down must not open the breaker of a
hosted model that happens to share its name, nor the other way round.

:func:`chat_completion` makes one call, streamed or not as the deployment says, and
reads the reply into a :class:`ChatReply`. Reasoning never reaches its
``text``: a ``reasoning_content`` field (vLLM, DeepSeek, llama.cpp) is
dropped and ``<think>`` blocks some local models write inline are cut out.
Their tokens are part of ``completion_tokens`` and so of ``output_tokens``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lcm.settings import Settings
from lcm.summarize.llm import Breakers
from lcm.turns import TurnGate

if TYPE_CHECKING:
    import openai

PROVIDER = "openai"
# A local server without authentication still needs some key in the SDK.
NO_KEY = "no-key"
_THINK_BLOCK = re.compile(r"<think>.*?</think>\s*", re.DOTALL)


class MalformedReply(ValueError):
    """The server answered 2xx with something that is not a chat completion."""


@dataclass(frozen=True)
class OpenAiClients:
    """The ``openai`` SDK client and its per-model breakers (thread-safe, shared)."""

    client: openai.OpenAI
    breakers: Breakers
    stream: bool = False
    turns: TurnGate = field(default_factory=lambda: TurnGate(1))

    @classmethod
    def connect(
        cls,
        *,
        api_key: str | None,
        base_url: str | None = None,
        timeout_seconds: float = 60.0,
        max_retries: int = 3,
        breakers: Breakers | None = None,
        stream: bool = False,
        turns: TurnGate | None = None,
    ) -> OpenAiClients:
        # Imported here, as the Anthropic SDK is: offline processes never pay for it.
        import openai

        client = openai.OpenAI(
            api_key=api_key or NO_KEY,
            base_url=base_url,
            timeout=timeout_seconds,
            max_retries=max_retries,  # the SDK backs off on 408/409/429/5xx itself
        )
        return cls(client, breakers or Breakers(5, 30.0), stream, turns or TurnGate(1))

    @classmethod
    def from_settings(
        cls, settings: Settings, turns: TurnGate | None = None
    ) -> OpenAiClients | None:
        """The deployment's connection; ``None`` when neither key nor endpoint is set."""
        if not settings.openai_configured:
            return None
        key = settings.openai_api_key
        return cls.connect(
            api_key=None if key is None else key.get_secret_value(),
            base_url=settings.openai_base_url,
            timeout_seconds=settings.llm_timeout_seconds,
            max_retries=settings.llm_max_retries,
            breakers=Breakers(settings.llm_breaker_failures, settings.llm_breaker_reset_seconds),
            stream=settings.openai_stream,
            turns=turns,
        )


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One function call the model asked for; ``arguments`` is its JSON text."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class ChatReply:
    """A chat completion as LCM reads it: text without reasoning, tool calls, tokens."""

    text: str
    model: str
    input_tokens: int
    output_tokens: int
    tool_calls: tuple[ToolCall, ...] = ()


def chat_completion(clients: OpenAiClients, model: str, **kwargs: Any) -> ChatReply:
    """One chat completion of ``model`` (no breaker: the caller holds one)."""
    with clients.turns.step_aside():  # other passes work while this one waits
        if clients.stream:
            chunks = clients.client.chat.completions.create(
                model=model, stream=True, stream_options={"include_usage": True}, **kwargs
            )
            return _from_chunks(chunks, model)
        reply: object = clients.client.chat.completions.create(model=model, **kwargs)
    return _from_completion(reply, model)


def without_thinking(text: str) -> str:
    """``text`` with inline ``<think>`` blocks removed (an unclosed one to the end)."""
    text = _THINK_BLOCK.sub("", text)
    cut = text.find("<think>")
    return (text if cut < 0 else text[:cut]).strip()


def _from_completion(reply: object, requested: str) -> ChatReply:
    """Validate the parts of a reply we rely on; the SDK does not by default."""
    import openai

    if not isinstance(reply, openai.types.chat.ChatCompletion):
        # A 2xx body that is not JSON comes back as a plain string.
        raise MalformedReply(f"expected a chat completion, got {type(reply).__name__}")
    choices = getattr(reply, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise MalformedReply("chat completion without choices")
    message = getattr(choices[0], "message", None)
    if message is None:
        raise MalformedReply("choice without a message")
    content = getattr(message, "content", None)
    calls = tuple(
        ToolCall(str(c.id), str(c.function.name), str(c.function.arguments or ""))
        for c in getattr(message, "tool_calls", None) or ()
        if getattr(c, "function", None) is not None
    )
    usage = getattr(reply, "usage", None)
    return ChatReply(
        text=without_thinking(content if isinstance(content, str) else ""),
        model=_model(getattr(reply, "model", None), requested),
        input_tokens=_count(getattr(usage, "prompt_tokens", None)),
        output_tokens=_count(getattr(usage, "completion_tokens", None)),
        tool_calls=calls,
    )


def _from_chunks(chunks: Iterable[Any], requested: str) -> ChatReply:
    """Assemble a streamed reply: text deltas, tool-call fragments, the last chunk's usage."""
    text: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    model: object = None
    usage: object = None
    for chunk in chunks:
        model = getattr(chunk, "model", None) or model
        usage = getattr(chunk, "usage", None) or usage
        for choice in getattr(chunk, "choices", None) or ():
            delta = getattr(choice, "delta", None)
            if delta is None:
                continue
            if isinstance(getattr(delta, "content", None), str):
                text.append(delta.content)
            for part in getattr(delta, "tool_calls", None) or ():
                call = calls.setdefault(int(part.index or 0), {"id": "", "name": "", "args": ""})
                function = getattr(part, "function", None)
                call["id"] = part.id or call["id"]
                if function is not None:
                    call["name"] = function.name or call["name"]
                    call["args"] += function.arguments or ""
    if model is None:
        raise MalformedReply("stream without a chunk")
    return ChatReply(
        text=without_thinking("".join(text)),
        model=_model(model, requested),
        input_tokens=_count(getattr(usage, "prompt_tokens", None)),
        output_tokens=_count(getattr(usage, "completion_tokens", None)),
        tool_calls=tuple(ToolCall(c["id"], c["name"], c["args"]) for _, c in sorted(calls.items())),
    )


def _model(value: object, requested: str) -> str:
    return value if isinstance(value, str) and value else requested


def _count(value: object) -> int:
    return value if isinstance(value, int) and value >= 0 else 0

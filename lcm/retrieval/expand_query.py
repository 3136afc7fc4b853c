"""expand_query: answer a question from the history with an LLM that may only use the tools.

The loop (official Anthropic SDK): the model gets grep, describe and expand
(see :mod:`lcm.retrieval.agent_tools`), calls them under the grant, and
answers citing ids. Without an API key the answer is assembled offline from
the best grep and expand hits, deterministically, and says so.

The caller (the ``expansion.query`` task) owns the grant: it revokes it when
this returns, whatever happened.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from lcm.errors import LcmError, SummarizerError
from lcm.retrieval.agent_tools import TOOLS, GrantedTools, ToolOutcome
from lcm.retrieval.answers import ExpandQueryAnswer, ExpandQueryRequest, Usage, cited_ids
from lcm.retrieval.offline_answer import offline_answer
from lcm.summarize.llm import LlmClients
from lcm.summarize.truncation import clip_to_tokens

log = logging.getLogger(__name__)

SYSTEM_PROMPT = """You answer questions about an AI agent's earlier conversation history, \
which Lossless Context Management (LCM) stores in full: every original message, plus a DAG \
of summaries (leaf summaries of messages, condensed summaries of summaries).

Tools: grep finds messages and summaries; describe shows one summary's metadata, full text \
and what it was condensed from; expand returns the original messages under summaries, exactly. \
Start with grep or describe; expand only the narrowest summaries you need, because everything \
you read is debited from a reading budget of {budget} tokens.

Answer in at most {max_tokens} tokens. Cite every message or summary you rely on by its id in \
square brackets, e.g. [msg_42] or [sum_0123456789abcdef]. If the history does not hold the \
answer, say so plainly; never guess."""


class DeadlinePassed(LcmError):
    """The call's deadline passed before the loop could answer."""

    code = "deadline_passed"


class LoopLlm(Protocol):
    """One model the loop talks to, in Messages API shapes (replies with ``content`` blocks).

    :class:`ExpansionLlm` (Anthropic) and
    :class:`lcm.retrieval.expand_query_chat.ChatExpansionLlm` (chat completions).
    """

    @property
    def model(self) -> str: ...

    @property
    def provider(self) -> str: ...

    def create(self, **kwargs: Any) -> Any: ...


@dataclass(frozen=True)
class ExpansionLlm:
    """The process's shared Anthropic connection and the model this loop uses (per tenant)."""

    llm: LlmClients
    model: str
    provider: str = "anthropic"

    def create(self, **kwargs: Any) -> Any:
        import anthropic

        breaker = self.llm.breakers.for_model(self.model)
        breaker.before_call()
        try:
            message = self.llm.client.messages.create(model=self.model, **kwargs)
        except anthropic.AnthropicError as exc:
            breaker.record_failure()
            raise SummarizerError(f"expand-query model call failed: {exc}") from exc
        except BaseException:
            breaker.record_failure()  # never leave a half-open trial unresolved
            raise
        breaker.record_success()
        return message


def run_expand_query(
    tools: GrantedTools,
    request: ExpandQueryRequest,
    llm: LoopLlm | None,
    *,
    max_turns: int,
    budget: int,
    deadline_at: float | None = None,
    clock: Callable[[], float] = time.time,
    spent: list[Usage] | None = None,
) -> ExpandQueryAnswer:
    """Answer ``request``; every read goes through ``tools`` (and so through the grant).

    ``deadline_at`` (seconds since the epoch) bounds the loop: no turn starts
    after it, and each model call may take only what is left of it
    (:class:`DeadlinePassed`, or the SDK's timeout as :class:`SummarizerError`).
    Each call's usage is appended to ``spent`` as it is made, so a loop that
    fails part way still accounts for what it cost.
    """
    if llm is None:
        log.info("no LLM configured: expand-query answers OFFLINE from the best grep hits")
        return offline_answer(tools, request)
    messages: list[dict[str, Any]] = [{"role": "user", "content": _opening(request)}]
    system = SYSTEM_PROMPT.format(budget=budget, max_tokens=request.max_tokens)
    usage: list[Usage] = [] if spent is None else spent
    for turn in range(1, max_turns + 2):
        # The last turn withholds the tools so the model must answer with what it read.
        final = turn > max_turns
        limit: dict[str, float] = {}
        if deadline_at is not None:
            left = deadline_at - clock()
            if left <= 0:
                raise DeadlinePassed("the expand-query deadline passed")
            limit["timeout"] = left
        reply = llm.create(
            **limit,
            max_tokens=request.max_tokens,
            system=system,
            messages=messages,
            tools=TOOLS,
            tool_choice={"type": "none"} if final else {"type": "auto"},
        )
        usage.append(_usage(reply, llm.model, llm.provider))
        calls = [b for b in reply.content if getattr(b, "type", None) == "tool_use"]
        if not calls or final:
            return _answer(tools, request, reply, llm.model, turn, usage)
        messages.append({"role": "assistant", "content": [_block(b) for b in reply.content]})
        messages.append({"role": "user", "content": [_result(b, tools) for b in calls]})
    raise AssertionError("unreachable: the final turn always answers")  # pragma: no cover


def _opening(request: ExpandQueryRequest) -> str:
    lines = [f"Question: {request.prompt}"]
    if request.query:
        lines.append(f"Suggested search: {request.query}")
    if request.summary_ids:
        lines.append("Start from these summaries: " + ", ".join(request.summary_ids))
    return "\n".join(lines)


def _block(block: Any) -> dict[str, Any]:
    if block.type == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    return {"type": "text", "text": getattr(block, "text", "")}


def _result(call: Any, tools: GrantedTools) -> dict[str, Any]:
    arguments = call.input if isinstance(call.input, dict) else {}
    outcome: ToolOutcome = tools.call(call.name, arguments)
    return {
        "type": "tool_result",
        "tool_use_id": call.id,
        "content": outcome.text,
        "is_error": outcome.is_error,
    }


def _answer(
    tools: GrantedTools,
    request: ExpandQueryRequest,
    reply: Any,
    model: str,
    turns: int,
    usage: list[Usage],
) -> ExpandQueryAnswer:
    text = "".join(getattr(b, "text", "") for b in reply.content if b.type == "text").strip()
    answer = clip_to_tokens(text, request.max_tokens)
    return ExpandQueryAnswer(
        answer=answer,
        cited_ids=cited_ids(answer, tools.seen_refs),
        offline=False,
        model=model,
        turns=turns,
        tokens_read=tools.tokens_read,
        usage=usage,
    )


def _usage(reply: Any, model: str, provider: str) -> Usage:
    usage = getattr(reply, "usage", None)
    return Usage(
        getattr(reply, "model", None) or model,
        int(getattr(usage, "input_tokens", 0) or 0),
        int(getattr(usage, "output_tokens", 0) or 0),
        provider,
    )

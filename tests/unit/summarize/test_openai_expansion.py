"""The expand-query loop's chat-completions adapter against the fake server (real SDK)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from lcm.errors import SummarizerError
from lcm.retrieval.agent_tools import TOOLS
from lcm.retrieval.expand_query_chat import ChatExpansionLlm, chat_messages
from lcm.summarize.breaker import BreakerState
from lcm.summarize.connections import LlmConnections
from lcm.summarize.llm import Breakers
from tests.fakes import Behaviour, FakeOpenAiServer
from tests.fakes.providers import openai_clients


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAiServer]:
    with FakeOpenAiServer() as server:
        yield server


def ask(llm: ChatExpansionLlm, final: bool = False) -> object:
    return llm.create(
        max_tokens=500,
        system="answer from the history",
        messages=[{"role": "user", "content": "What changed?"}],
        tools=TOOLS,
        tool_choice={"type": "none" if final else "auto"},
    )


@pytest.mark.parametrize("stream", [False, True])
def test_a_tool_call_comes_back_as_a_tool_use_block(
    fake_openai: FakeOpenAiServer, stream: bool
) -> None:
    fake_openai.script([Behaviour.tool_use("grep", {"pattern": "redis", "limit": 5})])
    llm = ChatExpansionLlm(openai_clients(fake_openai.base_url, stream=stream), "ask")
    reply = ask(llm)
    [block] = reply.content  # type: ignore[attr-defined]
    assert (block.type, block.name, block.input) == (
        "tool_use",
        "grep",
        {"pattern": "redis", "limit": 5},
    )
    assert block.id.startswith("call_fake_")
    assert reply.usage.input_tokens > 0  # type: ignore[attr-defined]
    sent = fake_openai.requests[0].body
    assert sent["tool_choice"] == "auto"
    assert [t["function"]["name"] for t in sent["tools"]] == ["grep", "describe", "expand"]
    assert sent["messages"][0] == {"role": "system", "content": "answer from the history"}


def test_the_final_turn_withholds_tool_use(fake_openai: FakeOpenAiServer) -> None:
    fake_openai.script([Behaviour.reply("The queue moved to Redis [msg_3].")])
    llm = ChatExpansionLlm(openai_clients(fake_openai.base_url), "ask")
    reply = ask(llm, final=True)
    assert [(b.type, b.text) for b in reply.content] == [  # type: ignore[attr-defined]
        ("text", "The queue moved to Redis [msg_3].")
    ]
    assert fake_openai.requests[0].body["tool_choice"] == "none"


@pytest.mark.parametrize("kind", ["500", "429", "garbage", "malformed"])
def test_a_failed_call_is_a_summarizer_error_and_counts_on_the_breaker(
    fake_openai: FakeOpenAiServer, kind: str
) -> None:
    breakers = Breakers(1, 60.0)
    fake_openai.set_default(kind)
    llm = ChatExpansionLlm(openai_clients(fake_openai.base_url, breakers=breakers), "ask")
    with pytest.raises(SummarizerError, match="expand-query model call failed"):
        ask(llm)
    assert breakers.states() == {"ask": BreakerState.OPEN}
    assert LlmConnections(openai=llm.llm).breaker_states() == {"openai:ask": BreakerState.OPEN}


def test_tool_turns_become_assistant_tool_calls_and_tool_messages() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "let me look"},
                {"type": "tool_use", "id": "c1", "name": "grep", "input": {"pattern": "x"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "c1",
                    "content": "3 matches",
                    "is_error": False,
                }
            ],
        },
    ]
    assert chat_messages("sys", messages) == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": "let me look",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "grep", "arguments": '{"pattern": "x"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "3 matches"},
    ]

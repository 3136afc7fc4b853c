"""Fixtures for the summarizer tests: the fake Messages API server and a controllable clock."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from lcm.summarize.anthropic_provider import AnthropicProvider
from lcm.summarize.llm import Breakers
from tests.fakes import FakeAnthropicServer
from tests.fakes.providers import anthropic_provider

PRIMARY = "claude-primary"
FALLBACK = "claude-fallback"


class FakeClock:
    """A monotonic clock that only moves when the test says so."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as server:
        yield server


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


ProviderFactory = Callable[..., AnthropicProvider]


@pytest.fixture
def make_provider(fake_anthropic: FakeAnthropicServer, clock: FakeClock) -> ProviderFactory:
    """An :class:`AnthropicProvider` on the fake server; keyword arguments override defaults."""

    def factory(**overrides: Any) -> AnthropicProvider:
        options: dict[str, Any] = {
            "model": PRIMARY,
            "timeout_seconds": 5.0,
            "max_retries": 2,
            "breakers": Breakers(3, 30.0, clock=clock),
        }
        options.update(overrides)
        return anthropic_provider(fake_anthropic.base_url, **options)

    return factory

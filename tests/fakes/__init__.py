"""Test doubles. The only fake LCM has is the LLM, and it speaks the real HTTP API."""

from tests.fakes.anthropic_script import Behaviour, RecordedRequest
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.fakes.openai_server import FakeOpenAiServer

__all__ = ["Behaviour", "FakeAnthropicServer", "FakeOpenAiServer", "RecordedRequest"]

"""What an expand-query is asked and what it answers (shared by the LLM and offline paths)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lcm.retrieval.agent_tools import REF_RE


@dataclass(frozen=True, slots=True)
class ExpandQueryRequest:
    prompt: str
    query: str | None = None
    summary_ids: tuple[str, ...] = ()
    max_tokens: int = 2_000
    timeout_ms: int | None = None  # None: the server's maximum

    def to_json(self) -> dict[str, Any]:
        return {
            "prompt": self.prompt,
            "query": self.query,
            "summary_ids": list(self.summary_ids),
            "max_tokens": self.max_tokens,
            "timeout_ms": self.timeout_ms,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ExpandQueryRequest:
        return cls(
            prompt=str(data["prompt"]),
            query=data.get("query"),
            summary_ids=tuple(data.get("summary_ids") or ()),
            max_tokens=int(data.get("max_tokens") or 2_000),
            timeout_ms=data.get("timeout_ms"),
        )


@dataclass(frozen=True, slots=True)
class Usage:
    model: str
    input_tokens: int
    output_tokens: int
    provider: str = ""


# A conversation's status in a multi-conversation answer's breakdown.
ANSWERED = "answered"
NO_MATCH = "no_match"  # nothing in it matched the query: not expanded
TIMED_OUT = "timed_out"  # the deadline passed before or while it was expanded
SKIPPED_BUDGET = "skipped_budget"  # the shared reading budget was spent before it
FAILED = "error"  # its loop failed (the model, or the grant ended)


@dataclass(frozen=True, slots=True)
class OutcomeError:
    code: str
    message: str


@dataclass(frozen=True, slots=True)
class ConversationOutcome:
    """How one conversation of an expand-query went."""

    conversation_id: int
    session_key: str | None
    status: str
    score: float | None = None
    elapsed_ms: int = 0
    tokens: int = 0  # read from its history, debited from the shared budget
    error: OutcomeError | None = None


@dataclass(frozen=True, slots=True)
class ExpandQueryAnswer:
    answer: str
    cited_ids: list[str]
    offline: bool
    model: str
    turns: int
    tokens_read: int
    usage: list[Usage] = field(default_factory=list)
    source_conversation_ids: list[int] = field(default_factory=list)
    conversations: list[ConversationOutcome] = field(default_factory=list)
    # True when a conversation was not expanded fully: deadline, budget, failure,
    # or ranked below the top K.
    truncated: bool = False
    timeout_ms: int | None = None


def cited_ids(answer: str, seen: set[str]) -> list[str]:
    """Ids the answer cites that the loop was actually shown (invented ids are dropped)."""
    return [ref for ref in dict.fromkeys(REF_RE.findall(answer)) if ref in seen]

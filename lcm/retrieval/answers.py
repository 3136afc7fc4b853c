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

    def to_json(self) -> dict[str, Any]:
        return {
            "prompt": self.prompt,
            "query": self.query,
            "summary_ids": list(self.summary_ids),
            "max_tokens": self.max_tokens,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ExpandQueryRequest:
        return cls(
            prompt=str(data["prompt"]),
            query=data.get("query"),
            summary_ids=tuple(data.get("summary_ids") or ()),
            max_tokens=int(data.get("max_tokens") or 2_000),
        )


@dataclass(frozen=True, slots=True)
class Usage:
    model: str
    input_tokens: int
    output_tokens: int
    provider: str = ""


@dataclass(frozen=True, slots=True)
class ExpandQueryAnswer:
    answer: str
    cited_ids: list[str]
    offline: bool
    model: str
    turns: int
    tokens_read: int
    usage: list[Usage] = field(default_factory=list)


def cited_ids(answer: str, seen: set[str]) -> list[str]:
    """Ids the answer cites that the loop was actually shown (invented ids are dropped)."""
    return [ref for ref in dict.fromkeys(REF_RE.findall(answer)) if ref in seen]

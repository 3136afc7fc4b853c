"""The expand-query answer when no LLM is configured: the best hits, marked as such.

Deterministic: the same history and request give the same answer. It reads
through the same granted tools as the LLM loop, so the grant's scope and
token cap bind it too.
"""

from __future__ import annotations

from typing import Any

import re2

from lcm.policy.timestamps import format_timestamp
from lcm.retrieval.agent_tools import GrantedTools
from lcm.retrieval.answers import ExpandQueryAnswer, ExpandQueryRequest
from lcm.retrieval.expand import Expansion
from lcm.retrieval.grep import GrepResult
from lcm.tokens import estimate_tokens

OFFLINE_MODEL = "offline-extract"
OFFLINE_MARK = (
    "[offline answer: no LLM is configured (ANTHROPIC_API_KEY is unset), so these are the "
    "best-matching excerpts of the history, not a synthesized answer]"
)
_HITS = 8
_EXCERPT_CHARS = 300


def offline_answer(tools: GrantedTools, request: ExpandQueryRequest) -> ExpandQueryAnswer:
    entries: list[tuple[str, str]] = []  # (ref, line)
    if request.query:
        found = _search(tools, request.query)
        if found is not None:
            for m in found.matches:
                where = f"conversation {m.conversation_id}" + (
                    f" #{m.seq}" if m.seq is not None else f" {m.kind} summary"
                )
                entries.append((m.ref, f"- [{m.ref}] {where}: {m.snippet}"))
    if request.summary_ids:
        outcome = tools.call("expand", {"summary_ids": list(request.summary_ids)})
        if not outcome.is_error and isinstance(outcome.payload, Expansion):
            for msg in outcome.payload.messages:
                excerpt = _excerpt(msg.message.get("content"))
                stamp = format_timestamp(msg.created_at)
                entries.append((msg.ref, f"- [{msg.ref}] #{msg.seq} {msg.role} {stamp}: {excerpt}"))
    lines = [OFFLINE_MARK, f"Question: {request.prompt}"]
    if not entries:
        lines.append("Nothing in the granted history matched.")
    cited: list[str] = []
    used = estimate_tokens("\n".join(lines))
    for ref, line in entries:
        cost = estimate_tokens(line) + 1
        if used + cost > request.max_tokens:
            break
        lines.append(line)
        used += cost
        if ref not in cited:
            cited.append(ref)
    return ExpandQueryAnswer(
        answer="\n".join(lines),
        cited_ids=cited,
        offline=True,
        model=OFFLINE_MODEL,
        turns=0,
        tokens_read=tools.tokens_read,
    )


def _search(tools: GrantedTools, query: str) -> GrepResult | None:
    """Full text; then the query as a regex; then as a literal, case-insensitively;
    then, where semantic recall is on, hybrid.

    The first attempt with matches wins. Word tokenizers split some strings
    (URLs, paths, ``ops-7``) so that full text misses them, and a query in
    regex syntax is refused by full text: the later attempts cover both.
    Hybrid comes last because its dense side always has nearest texts: first,
    it would win over an exact identifier match the regex attempts find.
    """
    attempts = [
        ("full_text", query),
        ("regex", query),
        ("regex", "(?i)" + re2.escape(query)),
    ]
    if tools.limits.semantic.enabled:
        attempts.append(("hybrid", query))
    last: GrepResult | None = None
    for mode, pattern in attempts:
        outcome = tools.call(
            "grep", {"pattern": pattern, "mode": mode, "sort": "relevance", "limit": _HITS}
        )
        if isinstance(outcome.payload, GrepResult):
            last = outcome.payload
            if last.matches:
                return last
    return last


def _excerpt(content: Any) -> str:
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = " ".join(str(block.get("text", "")) for block in content if isinstance(block, dict))
    else:
        text = ""
    flat = " ".join(text.split())
    return flat if len(flat) <= _EXCERPT_CHARS else flat[:_EXCERPT_CHARS] + "…"

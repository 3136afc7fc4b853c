"""grep, describe and expand as tools for an LLM, every call under an expansion grant.

These three are the only tools an expand-query loop has: there is no
expand-query tool, so a loop cannot start another (no recursion), and every
read is confined to the grant's conversations. Each call is one short
transaction: check the grant, run the tool, debit the tokens of what it
returns (truncating it to what is left), commit.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from lcm.db.engine import Transaction
from lcm.db.models import utcnow
from lcm.errors import Forbidden, InvalidInput, LcmError
from lcm.policy.timestamps import format_timestamp
from lcm.retrieval.describe import describe
from lcm.retrieval.expand import expand
from lcm.retrieval.grants import Grant, check_grant, debit
from lcm.retrieval.grep import GrepLimits, GrepQuery, grep
from lcm.retrieval.search_rows import Bounds
from lcm.summarize.truncation import clip_to_tokens
from lcm.tokens import estimate_tokens

REF_RE = re.compile(r"\b(?:msg_\d+|sum_[0-9a-f]{16}|file_[0-9a-f]{6,})\b")
LOOP_GREP_LIMIT = 20
EXHAUSTED = "reading budget exhausted: answer now with what you have read"

TOOLS: list[dict[str, Any]] = [
    {
        "name": "grep",
        "description": (
            "Search the conversation history (messages and summaries) in scope. "
            "mode 'full_text' (words, \"phrases\", -exclude, OR; ranked) for topics; "
            "mode 'regex' (RE2 syntax) for exact strings, identifiers, error codes; "
            "where the server has semantic recall on, mode 'hybrid' also finds "
            "the same thing said in other words. "
            "Returns matches with ids (msg_<n> or sum_<hex>), seq, time and a snippet."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "pattern": {"type": "string"},
                "mode": {"type": "string", "enum": ["full_text", "regex", "hybrid", "semantic"]},
                "scope": {"type": "string", "enum": ["messages", "summaries", "both"]},
                "sort": {"type": "string", "enum": ["relevance", "recency", "hybrid"]},
                "limit": {"type": "integer", "minimum": 1, "maximum": LOOP_GREP_LIMIT},
            },
            "required": ["pattern"],
        },
    },
    {
        "name": "describe",
        "description": (
            "Metadata and full text of one summary (sum_…) or stored file (file_…): "
            "kind, depth, time range, the summaries it was condensed from (parents), "
            "and the seq range of the messages it covers. Cheap; use before expand."
        ),
        "input_schema": {
            "type": "object",
            "properties": {"id": {"type": "string"}},
            "required": ["id"],
        },
    },
    {
        "name": "expand",
        "description": (
            "The original messages under summaries, in order, exactly as written, up to a "
            "token cap. Costly: expand the narrowest (leaf, depth 0) summaries you need; "
            "'omitted' lists what did not fit."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "summary_ids": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                "token_cap": {"type": "integer", "minimum": 1},
            },
            "required": ["summary_ids"],
        },
    },
]


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    text: str
    is_error: bool = False
    payload: Any = None  # the domain result, for callers that compose (offline answers)
    refs: frozenset[str] = field(default_factory=frozenset)


class GrantEnded(LcmError):
    """The grant was revoked or expired: the loop must stop reading."""

    code = "grant_ended"


@dataclass
class GrantedTools:
    """Runs tool calls for one grant; tracks every id the loop has been shown."""

    transaction: Transaction
    grant_id: str
    tenant_id: str
    limits: GrepLimits
    max_expand_tokens: int
    clock: Callable[[], datetime] = utcnow
    # Only these of the grant's conversations (one of a multi-conversation
    # call's loops); None: all of them. The budget stays the grant's, shared.
    only: frozenset[int] | None = None
    seen_refs: set[str] = field(default_factory=set)
    tokens_read: int = 0

    def remaining(self) -> int:
        """What is left of the grant's shared reading budget; :class:`GrantEnded` if over."""
        try:
            with self.transaction() as session:
                return check_grant(session, self.grant_id, self.clock()).remaining
        except Forbidden as exc:
            raise GrantEnded(exc.message) from exc

    def call(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        """One tool call. Raises :class:`GrantEnded`; other failures become error results."""
        try:
            with self.transaction() as session:
                now = self.clock()
                grant = check_grant(session, self.grant_id, now)
                if grant.remaining == 0:
                    return ToolOutcome(EXHAUSTED, is_error=True)
                payload = self._run(session, grant, name, arguments)
                text = to_json_text(payload)
                granted = debit(session, self.grant_id, estimate_tokens(text), now)
        except Forbidden as exc:
            raise GrantEnded(exc.message) from exc
        except LcmError as exc:
            return ToolOutcome(f"{exc.code}: {exc.message}", is_error=True)
        if granted < estimate_tokens(text):
            text = clip_to_tokens(text, granted) + "\n[truncated: reading budget exhausted]"
        self.tokens_read += granted
        refs = frozenset(REF_RE.findall(text))
        self.seen_refs |= refs
        return ToolOutcome(text, payload=payload, refs=refs)

    def _run(self, session: Session, grant: Grant, name: str, args: dict[str, Any]) -> Any:
        allowed = (
            grant.conversation_ids if self.only is None else grant.conversation_ids & self.only
        )
        if name == "grep":
            query = GrepQuery(
                pattern=str(args.get("pattern", "")),
                mode=args.get("mode", "full_text"),
                scope=args.get("scope", "both"),
                sort=args.get("sort", "relevance"),
                limit=min(int(args.get("limit", 10)), LOOP_GREP_LIMIT),
            )
            if query.mode not in (
                "regex",
                "full_text",
                "hybrid",
                "semantic",
            ) or query.scope not in (
                "messages",
                "summaries",
                "both",
            ):
                raise InvalidInput(
                    "mode must be regex|full_text|hybrid|semantic; scope messages|summaries|both"
                )
            bounds = Bounds(self.tenant_id, tuple(sorted(allowed)))
            return grep(session, bounds, query, self.limits)
        if name == "describe":
            return describe(session, self.tenant_id, str(args.get("id", "")), allowed)
        if name == "expand":
            ids = args.get("summary_ids") or []
            # The tenant's max_expand_tokens caps what the model may ask for.
            asked = int(args.get("token_cap") or self.max_expand_tokens)
            cap = min(asked, self.max_expand_tokens, grant.remaining)
            return expand(session, self.tenant_id, [str(i) for i in ids], cap, allowed)
        raise InvalidInput(f"unknown tool {name!r}; the tools are grep, describe and expand")


def to_jsonable(value: Any) -> Any:
    """Dataclasses, lists and timestamps as plain JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_jsonable(v) for v in value]
    if isinstance(value, datetime):
        return format_timestamp(value)
    return value


def to_json_text(value: Any) -> str:
    return json.dumps(to_jsonable(value), ensure_ascii=False, separators=(",", ":"))

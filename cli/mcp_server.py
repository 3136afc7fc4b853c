"""``lcm mcp``: the agent tools as an MCP server (official ``mcp`` SDK; stdio or streamable HTTP).

The server is a client of lcm-server's HTTP API with one tenant key, not a
second door into the database. It usually runs beside the agent (an MCP
host launches it over stdio), where a tenant key belongs and database
credentials do not; and going through the API keeps one place for
authentication, tenant isolation, statement timeouts and the expand-query
job queue with its deadline, for embedded and scaled deployments alike. It
calls the API through ``lcm_client.AsyncLcmClient`` (timeouts, retries of
these read-only calls on 429/503, the server's error codes).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Annotated, Any, Literal, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field, ValidationError

from lcm_client import AsyncLcmClient, LcmClientError, TransportError
from lcm_client.models import ExpandQueryIn, GrepIn

INSTRUCTIONS = """lcm keeps every message of your past conversations and compacts old \
history into summaries (ids sum_…) that point back to the originals. Your context may \
show such <summary> blocks; details they left out are not lost.

- lcm_grep: find where something was said (a name, an error, a file, a decision). \
Cheap; start here.
- lcm_describe: look at one summary or file id (its text, time range, what it covers). Cheap.
- lcm_expand_query: ask a question that needs the original messages behind summaries; a \
helper model reads them for you and answers with cited ids. Slow (seconds); use it when \
grep snippets and summaries are not enough."""

GREP_DESCRIPTION = """Search this agent's stored conversation history (messages and \
summaries). Use it to find when and where something was said: names, error messages, \
file paths, decisions, numbers.

mode "regex" (default, RE2 syntax, case-sensitive unless (?i)) for exact strings and \
identifiers; mode "full_text" for topics in natural words: terms are ANDed, \
"quoted phrases", -excluded, OR; ranked. Chinese/Japanese text works in full_text. \
Where the server has semantic recall on, mode "semantic" finds text by meaning \
(paraphrases, other words) and "hybrid" fuses it with full text (both rank by relevance). \
sort "recency" (newest first), "relevance", or "hybrid" (relevance, newer preferred). \
Scope defaults to this agent's session family. scope "files" searches inside stored \
large files (pasted attachments, big tool output), file_ids inside only those files. \
Each match has an id (msg_<n> for a message, sum_<hex> for a summary, file_<hex> with \
its line for a file), conversation, seq, time and a «highlighted» snippet. \
Follow up with lcm_describe on a sum_ id, or lcm_expand_query to read originals."""

DESCRIBE_DESCRIPTION = """Describe one summary (sum_…) or stored large file (file_…): \
its full text, kind and depth, time range, token counts, the summaries it was condensed \
from (parents) and into (children), and the seq range of the original messages it \
covers. Use it when a <summary> in your context or a grep hit looks relevant and you \
need its details before deciding whether to read the originals."""

EXPAND_QUERY_DESCRIPTION = """Answer a question from the ORIGINAL messages behind \
summaries. A helper model searches and reads (grep, describe, expand) under a scoped, \
expiring, token-capped grant and returns an answer of at most max_tokens with the ids \
it cites. Give a prompt (the question) and a query (words to search for) and/or \
summary_ids to start from. Slower than lcm_grep: use it for questions like "what exact \
command fixed the build?" when a summary only says the build was fixed. Without an LLM \
configured on the server the answer is a marked list of the best excerpts. \
Over several conversations (the session family, or all_conversations) the server ranks \
them by their matches to query and expands only the best few under one deadline \
(timeout_ms, capped by the server) and one reading budget: source_conversation_ids, a \
per-conversation breakdown and truncated say what was covered. One call at a time per \
session: a second while one runs is refused (409 expansion_busy)."""

Mode = Literal["regex", "full_text", "semantic", "hybrid"]
Sort = Literal["recency", "relevance", "hybrid"]


Model = TypeVar("Model", bound=BaseModel)


async def _result(call: Awaitable[BaseModel]) -> dict[str, Any]:
    """The answer as JSON for the agent; any failure as a ``ToolError`` it can read."""
    try:
        answer = await call
    except TransportError as exc:
        raise ToolError(f"lcm-server unreachable: {exc}") from exc
    except LcmClientError as exc:  # ApiError: "<status> <code>: <message>"
        raise ToolError(str(exc)) from exc
    return answer.model_dump(mode="json")


def _body(model: type[Model], **fields: Any) -> Model:
    """The tool's arguments as the API's request body (refused here as the server would)."""
    try:
        return model(**fields)
    except ValidationError as exc:
        raise ToolError(f"invalid_input: {exc}") from exc


def _scope(
    default_key: str | None,
    session_key: str | None,
    conversation_id: int | None,
    all_conversations: bool,
) -> dict[str, Any]:
    if conversation_id is not None:
        return {"conversation_id": conversation_id}
    if all_conversations:
        return {"all_conversations": True}
    key = session_key or default_key
    if key is None:
        raise ToolError("give session_key, conversation_id or all_conversations")
    return {"session_key": key}


SessionKey = Annotated[
    str | None, Field(description="Session family to search (default: this agent's).")
]
ConversationId = Annotated[int | None, Field(description="Only this conversation.")]
AllConversations = Annotated[bool, Field(description="Every conversation of the tenant.")]
TimeoutMs = Annotated[
    int | None, Field(ge=1, le=3_600_000, description="Deadline of the whole call (server-capped).")
]


def build_server(api: AsyncLcmClient, default_session_key: str | None = None) -> MCPServer:
    """The MCP server exposing ``lcm_grep``, ``lcm_describe`` and ``lcm_expand_query``."""
    server: MCPServer = MCPServer("lcm", instructions=INSTRUCTIONS)

    @server.tool(name="lcm_grep", description=GREP_DESCRIPTION)
    async def lcm_grep(
        pattern: str,
        mode: Mode = "regex",
        sort: Sort = "recency",
        scope: Literal["messages", "summaries", "both", "files"] = "both",
        limit: Annotated[int, Field(ge=1, le=200)] = 20,
        since: str | None = None,
        before: str | None = None,
        session_key: SessionKey = None,
        conversation_id: ConversationId = None,
        all_conversations: AllConversations = False,
        file_ids: Annotated[
            list[str] | None,
            Field(description="Search inside only these stored files (file_… ids)."),
        ] = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"pattern": pattern, "mode": mode, "sort": sort}
        body |= {"limit": limit, "since": since, "before": before}
        if file_ids:
            body |= {"file_ids": file_ids, "scope": "files"}
        else:
            body["scope"] = scope
        body |= _scope(default_session_key, session_key, conversation_id, all_conversations)
        return await _result(api.grep(_body(GrepIn, **body)))

    @server.tool(name="lcm_describe", description=DESCRIBE_DESCRIPTION)
    async def lcm_describe(
        id: Annotated[str, Field(description="A sum_… or file_… id.")],
    ) -> dict[str, Any]:
        return await _result(api.describe(id))

    @server.tool(name="lcm_expand_query", description=EXPAND_QUERY_DESCRIPTION)
    async def lcm_expand_query(
        prompt: str,
        query: str | None = None,
        summary_ids: list[str] | None = None,
        max_tokens: Annotated[int, Field(ge=1, le=16_000)] = 2_000,
        session_key: SessionKey = None,
        conversation_id: ConversationId = None,
        all_conversations: AllConversations = False,
        timeout_ms: TimeoutMs = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"prompt": prompt, "query": query, "max_tokens": max_tokens}
        body |= {"summary_ids": summary_ids or [], "timeout_ms": timeout_ms}
        explicit = session_key is not None or conversation_id is not None or all_conversations
        # With only summary_ids, the server scopes the grant to their conversations.
        if explicit or not summary_ids:
            body |= _scope(default_session_key, session_key, conversation_id, all_conversations)
        caller = session_key or default_session_key
        if body.get("all_conversations") and caller is not None:
            body["session_key"] = caller  # names the asking session (one call at a time)
        return await _result(api.expand_query(_body(ExpandQueryIn, **body)))

    return server

"""Agent tools over the stored history: grep, describe, expand and expand-query.

Summaries are lossy by design; these tools are how an agent finds and
recovers the originals. Every read is bounded by the tenant, and inside an
expand-query loop also by the conversations and the token budget of a grant.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lcm.exports import lazy_exports

if TYPE_CHECKING:
    from lcm.retrieval import expand, grep
    from lcm.retrieval.agent_tools import GrantEnded, to_jsonable
    from lcm.retrieval.answers import ExpandQueryRequest, Usage
    from lcm.retrieval.describe import (
        DEFAULT_FILE_PAGE_CHARS,
        MAX_FILE_PAGE_CHARS,
        FileDescription,
        SummaryDescription,
        describe_file,
        describe_summary,
        file_content_page,
    )
    from lcm.retrieval.expand import Expansion, with_sources
    from lcm.retrieval.expansion import (
        ExpansionCaller,
        abandon_expand_query,
        answer_granted_query,
        ask_expand_query,
        grep_limits,
        start_expand_query,
        take_answer,
    )
    from lcm.retrieval.file_grep import grep_large_files
    from lcm.retrieval.grants import sweep_grants
    from lcm.retrieval.grep import GrepQuery, GrepResult
    from lcm.retrieval.prompt_cue import prompt_cue_for
    from lcm.retrieval.repository import HistoryRepository
    from lcm.retrieval.scope import ScopeSelector, resolve_bounds
    from lcm.retrieval.search_backlog import index_search_backlog, request_indexing

__all__ = [
    "DEFAULT_FILE_PAGE_CHARS",
    "MAX_FILE_PAGE_CHARS",
    "ExpandQueryRequest",
    "Expansion",
    "ExpansionCaller",
    "FileDescription",
    "GrantEnded",
    "GrepQuery",
    "GrepResult",
    "HistoryRepository",
    "ScopeSelector",
    "SummaryDescription",
    "Usage",
    "abandon_expand_query",
    "answer_granted_query",
    "ask_expand_query",
    "describe_file",
    "describe_summary",
    "expand",
    "file_content_page",
    "grep",
    "grep_large_files",
    "grep_limits",
    "index_search_backlog",
    "prompt_cue_for",
    "request_indexing",
    "resolve_bounds",
    "start_expand_query",
    "sweep_grants",
    "take_answer",
    "to_jsonable",
    "with_sources",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "lcm.retrieval.agent_tools": ("GrantEnded", "to_jsonable"),
        "lcm.retrieval.answers": ("ExpandQueryRequest", "Usage"),
        "lcm.retrieval.describe": (
            "DEFAULT_FILE_PAGE_CHARS",
            "MAX_FILE_PAGE_CHARS",
            "FileDescription",
            "SummaryDescription",
            "describe_file",
            "describe_summary",
            "file_content_page",
        ),
        "lcm.retrieval.expand": ("Expansion", "expand", "with_sources"),
        "lcm.retrieval.expansion": (
            "ExpansionCaller",
            "abandon_expand_query",
            "answer_granted_query",
            "ask_expand_query",
            "grep_limits",
            "start_expand_query",
            "take_answer",
        ),
        "lcm.retrieval.file_grep": ("grep_large_files",),
        "lcm.retrieval.grants": ("sweep_grants",),
        "lcm.retrieval.grep": ("GrepQuery", "GrepResult", "grep"),
        "lcm.retrieval.prompt_cue": ("prompt_cue_for",),
        "lcm.retrieval.repository": ("HistoryRepository",),
        "lcm.retrieval.scope": ("ScopeSelector", "resolve_bounds"),
        "lcm.retrieval.search_backlog": ("index_search_backlog", "request_indexing"),
    },
)

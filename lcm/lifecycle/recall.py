"""The system-prompt addition that tells the model how to recall summarized history."""

from __future__ import annotations

import json

RECALL_TOOLS = ("lcm_grep", "lcm_describe", "lcm_expand", "lcm_expand_query")
_HINTS = {
    "lcm_grep": "- lcm_grep: search the original messages and summaries by regex or words.",
    "lcm_describe": "- lcm_describe: show one summary (sum_…) or stored file (file_…).",
    "lcm_expand": "- lcm_expand: read the original messages under summary ids.",
    "lcm_expand_query": "- lcm_expand_query: ask a question answered from the expanded"
    " history, with cited ids.",
}
# The arguments a deferred call's example shows (each tool's required ones).
_EXAMPLE_ARGS: dict[str, dict[str, object]] = {
    "lcm_grep": {"pattern": "..."},
    "lcm_describe": {"id": "sum_..."},
    "lcm_expand": {"summary_ids": ["sum_..."]},
    "lcm_expand_query": {"prompt": "..."},
}


def recall_prompt(
    summary_count: int,
    available_tools: frozenset[str] | None = None,
    tool_caller: str | None = None,
) -> str | None:
    """Guidance for a context that holds summaries; None when nothing is summarized.

    ``available_tools`` limits the guidance to the recall tools the run can call
    (None: assume all of them). ``tool_caller`` names the tool a host with tool
    search (OpenClaw's default) calls deferred tools through (``tool_call``):
    the model cannot call the recall tools by their names there, so the
    guidance says how to reach them through it.
    """
    if summary_count <= 0:
        return None
    tools = [t for t in RECALL_TOOLS if available_tools is None or t in available_tools]
    lines = [
        "## Conversation memory (lossless context management)",
        f"Older parts of this conversation are condensed into {summary_count} summaries,"
        ' shown as <summary id="sum_…"> blocks. Nothing was deleted: every original'
        " message is kept and can be recalled.",
        "Summaries are compressed; when a detail matters (exact values, code, names,"
        " decisions), recall it instead of guessing.",
    ]
    if tools:
        lines.append("Recall tools:")
        lines.extend(_HINTS[t] for t in tools)
        if tool_caller is not None:
            lines += _deferred(tools, tool_caller)
    return "\n".join(lines)


def _deferred(tools: list[str], caller: str) -> list[str]:
    """How to call the recall tools through ``caller``, with an example."""
    example = "lcm_grep" if "lcm_grep" in tools else tools[0]
    call = json.dumps({"id": example, "args": _EXAMPLE_ARGS[example]})
    return [
        f"These tools are deferred: they cannot be called directly. Call each one through"
        f' the tool {caller}, with the recall tool\'s name as "id" and its arguments as'
        ' "args", for example:',
        f"{caller} {call}",
    ]

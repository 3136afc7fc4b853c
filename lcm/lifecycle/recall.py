"""The system-prompt addition that tells the model how to recall summarized history."""

from __future__ import annotations

RECALL_TOOLS = ("lcm_grep", "lcm_describe", "lcm_expand", "lcm_expand_query")


def recall_prompt(summary_count: int, available_tools: frozenset[str] | None = None) -> str | None:
    """Guidance for a context that holds summaries; None when nothing is summarized.

    ``available_tools`` limits the guidance to the recall tools the run can call
    (None: assume all of them).
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
    hints = {
        "lcm_grep": "- lcm_grep: search the original messages and summaries by regex or words.",
        "lcm_describe": "- lcm_describe: show one summary (sum_…) or stored file (file_…).",
        "lcm_expand": "- lcm_expand: read the original messages under summary ids.",
        "lcm_expand_query": "- lcm_expand_query: ask a question answered from the expanded"
        " history, with cited ids.",
    }
    if tools:
        lines.append("Recall tools:")
        lines.extend(hints[t] for t in tools)
    return "\n".join(lines)

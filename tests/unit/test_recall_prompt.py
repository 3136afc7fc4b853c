"""The recall guidance: the tools named directly, or reached through a host's tool caller."""

from __future__ import annotations

import json

from lcm.lifecycle.recall import RECALL_TOOLS, recall_prompt

INTRO = (
    "## Conversation memory (lossless context management)\n"
    "Older parts of this conversation are condensed into 3 summaries, shown as"
    ' <summary id="sum_…"> blocks. Nothing was deleted: every original message is kept'
    " and can be recalled.\n"
    "Summaries are compressed; when a detail matters (exact values, code, names,"
    " decisions), recall it instead of guessing."
)
HINTS = (
    "Recall tools:\n"
    "- lcm_grep: search the original messages and summaries by regex or words.\n"
    "- lcm_describe: show one summary (sum_…) or stored file (file_…).\n"
    "- lcm_expand: read the original messages under summary ids.\n"
    "- lcm_expand_query: ask a question answered from the expanded history, with cited ids."
)


def test_without_a_tool_caller_the_tools_are_named_to_be_called_directly() -> None:
    assert recall_prompt(3) == f"{INTRO}\n{HINTS}"
    only_grep = recall_prompt(3, frozenset({"lcm_grep", "read"}))
    assert only_grep == f"{INTRO}\n{HINTS.splitlines()[0]}\n{HINTS.splitlines()[1]}"
    assert recall_prompt(3, frozenset()) == INTRO
    assert recall_prompt(0) is None


def test_with_a_tool_caller_the_tools_are_deferred_behind_it() -> None:
    text = recall_prompt(3, tool_caller="tool_call")
    assert text is not None
    assert text.startswith(f"{INTRO}\n{HINTS}\n")  # every tool's hint is still there
    assert "deferred" in text
    assert "cannot be called directly" in text
    assert text.endswith('\ntool_call {"id": "lcm_grep", "args": {"pattern": "..."}}')
    assert recall_prompt(0, tool_caller="tool_call") is None


def test_the_example_calls_a_tool_the_run_has_with_its_required_arguments() -> None:
    text = recall_prompt(2, frozenset({"lcm_expand", "lcm_describe"}), "tool_call")
    assert text is not None
    example = text.splitlines()[-1]
    assert example.startswith("tool_call ")
    assert json.loads(example.removeprefix("tool_call ")) == {
        "id": "lcm_describe",
        "args": {"id": "sum_..."},
    }
    assert "lcm_grep" not in text
    # No recall tool to reach: nothing to say about reaching them.
    assert recall_prompt(2, frozenset({"read"}), "tool_call") == INTRO.replace("3", "2")


def test_every_recall_tool_has_an_example() -> None:
    for tool in RECALL_TOOLS:
        text = recall_prompt(1, frozenset({tool}), "invoke")
        assert text is not None
        assert json.loads(text.splitlines()[-1].removeprefix("invoke "))["id"] == tool

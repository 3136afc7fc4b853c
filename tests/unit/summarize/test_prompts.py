"""Depth-aware prompts: what each depth asks for and what every prompt carries."""

from __future__ import annotations

import pytest

from lcm.summarize.footer import FOOTER_PREFIX
from lcm.summarize.prompts import build_prompt, depth_instructions
from lcm.summarize.provider import SummaryRequest


def prompt_for(**changes: object) -> tuple[str, str, int]:
    fields: dict[str, object] = {"source_text": "SOURCE TEXT", "depth": 0, "target_tokens": 800}
    fields.update(changes)
    prompt = build_prompt(SummaryRequest(**fields))  # type: ignore[arg-type]
    return prompt.system, prompt.user, prompt.max_output_tokens


@pytest.mark.parametrize(
    ("depth", "phrase"),
    [
        (0, "timestamp"),
        (1, "chronological account of the session"),
        (2, "what carries forward"),
        (3, "durable decisions"),
        (7, "durable decisions"),
    ],
)
def test_each_depth_asks_for_its_own_summary(depth: int, phrase: str) -> None:
    system, _, _ = prompt_for(depth=depth)
    assert phrase in system
    assert depth_instructions(depth) in system


def test_leaf_prompt_asks_for_decisions_files_errors_and_open_questions() -> None:
    leaf = depth_instructions(0)
    for word in ("decision", "files", "error", "questions left open"):
        assert word in leaf


def test_every_prompt_requests_the_footer_and_holds_the_source() -> None:
    for depth in range(4):
        system, user, _ = prompt_for(depth=depth)
        assert FOOTER_PREFIX in system
        assert FOOTER_PREFIX in user
        assert "<source" in user
        assert "SOURCE TEXT" in user
        assert "800 tokens" in user


def test_previous_context_is_for_continuity_only() -> None:
    system, user, _ = prompt_for(previous_context="Before: picked SQLite for embedded mode.")
    assert (
        "<previous_context>\nBefore: picked SQLite for embedded mode.\n</previous_context>" in user
    )
    assert user.index("<previous_context>") < user.index("<source")
    assert "do not summarize it again" in system
    no_prev_system, no_prev_user, _ = prompt_for()
    assert "<previous_context>" not in no_prev_user
    assert "previous_context" not in no_prev_system


def test_custom_instructions_are_included_when_given() -> None:
    system, _, _ = prompt_for(custom_instructions="  Write in British English.  ")
    assert "Write in British English." in system
    assert "operator" not in prompt_for(custom_instructions="   ")[0]


def test_aggressive_prompt_wants_durable_facts_and_fewer_tokens() -> None:
    normal_system, _, normal_max = prompt_for(target_tokens=800)
    system, user, aggressive_max = prompt_for(target_tokens=400, aggressive=True)
    assert "durable facts" in system
    assert "durable facts" not in normal_system
    assert "durable-facts summary" in user
    assert aggressive_max < normal_max


def test_kind_follows_depth() -> None:
    assert SummaryRequest(source_text="x", depth=0, target_tokens=10).kind == "leaf"
    assert SummaryRequest(source_text="x", depth=2, target_tokens=10).kind == "condensed"
    assert 'kind="condensed" depth="2"' in prompt_for(depth=2)[1]
    with pytest.raises(ValueError, match="depth must be >= 0"):
        SummaryRequest(source_text="x", depth=-1, target_tokens=10)
    with pytest.raises(ValueError, match="target_tokens must be >= 1"):
        SummaryRequest(source_text="x", depth=0, target_tokens=0)

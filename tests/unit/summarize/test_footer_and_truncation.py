"""The expansion footer and the deterministic truncation fallback."""

from __future__ import annotations

import pytest

from lcm.summarize.footer import FOOTER_PREFIX, derive_topics, ensure_footer, has_footer
from lcm.summarize.truncation import (
    TRUNCATION_MARKER,
    clip_end_to_tokens,
    clip_to_tokens,
    truncate_source,
)
from lcm.tokens import estimate_tokens

SOURCE = "\n".join(
    f"[2026-11-20T11:{i:02d}:00Z] assistant: Edited api/routes/grep.py to bound regex time; "
    f"Priya Nair reviewed change {i}."
    for i in range(60)
)


def test_has_footer_needs_a_final_line_with_topics() -> None:
    assert has_footer(f"Body.\n{FOOTER_PREFIX} grep, regex")
    assert not has_footer(f"{FOOTER_PREFIX} grep\nBody after it.")
    assert not has_footer(f"Body.\n{FOOTER_PREFIX}")
    assert not has_footer("")


def test_ensure_footer_keeps_the_models_own() -> None:
    summary = f"Bounded regex time.\n{FOOTER_PREFIX} grep timeouts"
    assert ensure_footer(summary + "\n\n", SOURCE) == summary


def test_ensure_footer_derives_one_from_the_source() -> None:
    text = ensure_footer("Bounded regex time.", SOURCE)
    assert text.startswith("Bounded regex time.\n\n")
    footer = text.splitlines()[-1]
    assert footer.startswith(FOOTER_PREFIX)
    assert "api/routes/grep.py" in footer
    assert "Priya Nair" in footer
    assert ensure_footer("", SOURCE) == footer


def test_derived_topics_are_deterministic_and_bounded() -> None:
    assert derive_topics(SOURCE) == derive_topics(SOURCE)
    assert 0 < len(derive_topics(SOURCE, limit=3)) <= 3


def test_truncation_fits_budget_with_marker_head_tail_and_footer() -> None:
    text = truncate_source(SOURCE, 512)
    assert estimate_tokens(text) <= 512
    assert TRUNCATION_MARKER in text
    assert text.startswith("[2026-11-20T11:00:00Z]")
    assert "change 59." in text  # the end of the span survives
    assert has_footer(text)
    assert truncate_source(SOURCE, 512) == text


@pytest.mark.parametrize("budget", [32, 64, 100, 512, 2000])
def test_truncation_never_exceeds_budget(budget: int) -> None:
    assert estimate_tokens(truncate_source(SOURCE, budget)) <= budget


def test_short_source_is_kept_whole_and_marked() -> None:
    text = truncate_source("[2026-11-20T11:00:00Z] user: hi", 512)
    assert text.startswith(f"[2026-11-20T11:00:00Z] user: hi\n{TRUNCATION_MARKER}")


def test_cjk_truncation_counts_wide_characters() -> None:
    source = "我们决定把队列迁移到Redis。并在 workers/app.py 中修复了错误。" * 200
    text = truncate_source(source, 128)
    assert estimate_tokens(text) <= 128
    assert TRUNCATION_MARKER in text
    assert text.startswith("我们决定")


def test_clips_prefer_word_breaks() -> None:
    text = "alpha beta gamma delta epsilon zeta"
    assert clip_to_tokens(text, 4) == "alpha beta gamma"
    assert clip_end_to_tokens(text, 4) == "epsilon zeta"  # not "a epsilon zeta"
    assert clip_to_tokens(text, 100) == text
    assert clip_to_tokens(text, 0) == ""

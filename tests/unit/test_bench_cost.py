"""``python -m bench cost``'s measures: the cacheable prefix and the rolling-summary baseline."""

from __future__ import annotations

from bench.cost_model import Replay, Rolling, cacheable_chars, rolling_replay, serialized
from bench.workload import Step, synthetic_steps


def test_cacheable_chars_is_the_common_prefix() -> None:
    assert cacheable_chars("abcdef", "abcdef-more") == 6
    assert cacheable_chars("abcdef", "abXdef") == 2
    assert cacheable_chars("", "abc") == 0
    assert cacheable_chars("x" * 100_000 + "a", "x" * 100_000 + "b") == 100_000


def test_a_request_extending_the_previous_one_is_cacheable_and_a_rewrite_breaks() -> None:
    replay = Replay("t")
    first = [{"role": "user", "content": "hello " * 200}]
    grown = [*first, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "go"}]
    rewritten = [{"role": "user", "content": "<summary>short</summary>"}, *grown[1:]]
    cold = replay.request(serialized(first))
    warm = replay.request(serialized(grown))
    broken = replay.request(serialized(rewritten), compacted=True)
    assert (cold.cached_tokens, cold.broke) == (0, False)  # a session starts cold
    assert not warm.broke
    assert warm.cached_tokens >= cold.tokens - 2  # all of the first but its closing "]"
    assert broken.broke
    assert broken.compacted
    assert broken.cached_tokens <= 8  # `[{"role":"user","content":"` and no more
    assert replay.compaction_breaks() == [broken]
    replay.new_session()
    assert replay.request(serialized(grown)).cached_tokens == 0


def test_the_rolling_summary_replaces_all_but_the_kept_turns() -> None:
    steps = synthetic_steps(300)
    replay = rolling_replay([steps], Rolling(token_budget=8_000, keep_turns=4, summary_tokens=200))
    assert len(replay.turns) == 300
    assert replay.summary_calls > 5
    assert replay.summary_output_tokens == 200 * replay.summary_calls
    # What each call read: at least the 0.75 x budget context less the kept turns.
    assert replay.summary_input_tokens > replay.summary_calls * 1_000
    breaks = replay.compaction_breaks()
    assert len(breaks) == replay.summary_calls
    # The summary is rewritten from its first character: nothing stays cached.
    assert all(t.cached_tokens < 0.05 * t.tokens for t in breaks)
    assert max(t.tokens for t in replay.turns) < 8_000 + 4 * max_turn_tokens(steps)
    assert 0.5 < replay.overall_share() < 1


def max_turn_tokens(steps: list[Step]) -> int:
    return max(len(serialized([*s.inputs, *s.outputs])) // 3 for s in steps)

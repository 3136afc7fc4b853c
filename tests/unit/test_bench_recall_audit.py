"""The recall set's audit (``bench/recall_audit.py``): a paraphrase question may not reuse
its answers' words. The last test holds the committed set to the rule on the real sessions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.recall_audit import (
    ALLOWED,
    audit,
    content_stems,
    counts,
    line_text,
    report_compliant,
)
from bench.recall_set import SET_PATH, RecallQuestion, load
from bench.transcripts import DATA


def _line(role: str, content: Any) -> dict[str, Any]:
    return {"type": role, "uuid": f"{role}-x", "message": {"role": role, "content": content}}


def _session(tmp_path: Path) -> Path:
    """Line 1 answers; lines 2-40 are filler that all say "deploy" (common in the session)."""
    answer = _line(
        "assistant",
        [
            {"type": "thinking", "thinking": "raise the limit", "signature": "zebra"},
            {"type": "text", "text": "The retry limit is now five, so the deploy survives."},
            {"type": "tool_use", "id": "toolu_giraffe", "name": "Edit", "input": {"x": "tests"}},
        ],
    )
    filler = [_line("user", f"deploy again, round {n}") for n in range(39)]
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(v) + "\n" for v in [answer, *filler]), encoding="utf-8")
    return path


def _ask(text: str, style: str = "paraphrase") -> RecallQuestion:
    return RecallQuestion("q-" + text[:12], "s.jsonl", "fact", style, text, ((1,),))


def test_words_are_stemmed_and_function_words_dropped() -> None:
    stems = content_stems("Why did the retries keep failing? It failed twice, 3 times.")
    assert stems["retri"] == ["retries"]
    assert stems["fail"] == ["failing", "failed"]
    assert not {"why", "did", "the", "it", "3"} & set(stems)


def test_a_line_gives_its_content_text_not_its_ids_or_signatures() -> None:
    text = line_text(_session_line())
    assert "retry limit" in text
    assert "raise the limit" in text  # reasoning is text too
    assert "Edit" in text
    assert "tests" in text
    assert "zebra" not in text
    assert "giraffe" not in text


def _session_line() -> dict[str, Any]:
    return _line(
        "assistant",
        [
            {"type": "thinking", "thinking": "raise the limit", "signature": "zebra"},
            {"type": "text", "text": "The retry limit is now five."},
            {"type": "tool_use", "id": "toolu_giraffe", "name": "Edit", "input": {"x": "tests"}},
        ],
    )


def test_the_audit_names_shared_stems_and_lets_common_and_allowed_ones_pass(
    tmp_path: Path,
) -> None:
    _session(tmp_path)
    questions = [
        _ask("How many retries did we settle on?"),  # reuses the answer's word
        _ask("How many attempts does the rollout get before the deploy gives up?"),
        _ask("Which test changed, and was the giraffe or the zebra fed?"),
        _ask("retry limit", style="identifier"),  # exempt: reuses a name on purpose
    ]
    reused, common, allowed = audit(questions, tmp_path)
    assert reused.shared == {"retri": ["retries"]}
    assert reused.forbidden == ["retri"]
    # "deploy" is in every line, far above COMMON_SHARE: shared, yet no clue to the answer.
    assert common.shared == {"deploy": ["deploy"]}
    assert common.forbidden == []
    assert "test" in ALLOWED
    assert allowed.shared == {"test": ["test"]}
    assert allowed.forbidden == []  # ids and signatures are not the answer's words
    assert counts([reused, common, allowed]) == {"1": 3}
    assert counts([reused, common, allowed], allowed=False) == {"1": 1, "0": 2}


def test_a_run_also_scores_the_questions_keeping_the_rule_and_those_sharing_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _session(tmp_path)
    reused = _ask("How many retries did we settle on?")
    common = _ask("How many attempts before the deploy gives up?")
    fresh = _ask("Before giving up, how many attempts?")
    scored = [(reused, 1.0, 1.0), (common, 0.0, 0.0), (fresh, 1.0, 0.5)]
    report_compliant({"dense": scored}, tmp_path)
    out = capsys.readouterr().out
    assert "keeping the rule: n=2" in out
    assert "dense" in out
    assert "0.500 (0.250)" in out  # common and fresh, not the question reusing "retries"
    assert "sharing no stem: n=1" in out
    assert "1.000 (0.500)" in out  # fresh alone


@pytest.mark.skipif(not DATA.is_dir(), reason=f"{DATA} is absent")
def test_the_committed_set_keeps_its_rule_on_the_real_sessions() -> None:
    findings = audit(load(SET_PATH), DATA)
    assert len(findings) >= 200
    broken = {f.question.id: f.forbidden for f in findings if f.forbidden}
    assert broken == {}

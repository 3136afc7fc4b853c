"""The paraphrase recall set and its scorer (``bench/recall_set.py``); no session data needed."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench.recall_import import line_client_ids
from bench.recall_set import (
    KINDS,
    SET_PATH,
    STYLES,
    keywords,
    load,
    recall_at,
    reciprocal_rank,
)
from lcm.transcripts.parse import parse_transcript


def test_recall_at_k_counts_answer_groups_found_in_the_top_k() -> None:
    ranked = ["a", "b", "c", "d"]
    assert recall_at(ranked, [{"c"}], 3) == 1.0
    assert recall_at(ranked, [{"d"}], 3) == 0.0  # fourth, outside the top 3
    assert recall_at(ranked, [{"x", "b"}], 3) == 1.0  # any line of a group answers it
    assert recall_at(ranked, [{"a"}, {"d"}], 3) == 0.5  # multi-hop: one piece of two
    assert recall_at(ranked, [{"a"}, {"b", "z"}], 2) == 1.0
    assert recall_at([], [{"a"}], 10) == 0.0
    with pytest.raises(ValueError, match="at least one answer group"):
        recall_at(ranked, [], 3)


def test_reciprocal_rank_is_that_of_the_first_answering_result() -> None:
    assert reciprocal_rank(["a", "b", "c"], [{"c"}]) == pytest.approx(1 / 3)
    assert reciprocal_rank(["a", "b", "c"], [{"c"}, {"b"}]) == 0.5  # any group's first hit
    assert reciprocal_rank(["a", "b"], [{"z"}]) == 0.0
    assert reciprocal_rank(["a"], [{"a"}]) == 1.0


def test_keywords_drop_the_question_frame_and_keep_identifiers() -> None:
    assert keywords("What did we decide about the retry limit?") == ["decide", "retry", "limit"]
    assert keywords("Which file had the off-by-one in cli/args.ts?") == [
        "file",
        "off-by-one",
        "cli/args.ts",
    ]
    assert keywords("Why was it so? Why, why!") == []


def test_the_set_is_well_formed_and_big_enough() -> None:
    questions = load()
    assert len(questions) >= 200
    assert {q.kind for q in questions} <= set(KINDS)
    assert {q.style for q in questions} == set(STYLES)
    by_style = Counter(q.style for q in questions)
    # Identifier questions are a small labelled share; most are paraphrases.
    assert by_style["identifier"] * 4 < by_style["paraphrase"]
    by_kind = Counter(q.kind for q in questions if q.style == "paraphrase")
    assert all(by_kind[k] >= 5 for k in KINDS), by_kind
    assert len({q.source for q in questions}) >= 5
    for q in questions:
        assert not Path(q.source).is_absolute()
        assert ".." not in Path(q.source).parts
        assert q.question.strip()
        assert q.answers
        if q.kind == "multi-hop":
            assert len(q.answers) >= 2


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        (lambda r: r.pop("kind"), "fields"),
        (lambda r: r.update(kind="gossip"), "unknown kind"),
        (lambda r: r.update(answers=[[]]), "answers"),
        (lambda r: r.update(answers=[[0]]), "answers"),
        (lambda r: r.update(kind="multi-hop", answers=[[3]]), "multi-hop"),
        (lambda r: r.update(question=" "), "empty question"),
    ],
)
def test_a_malformed_record_is_refused_with_its_line(
    tmp_path: Path, change: Callable[[dict[str, Any]], object], complaint: str
) -> None:
    record = json.loads(SET_PATH.read_text(encoding="utf-8").splitlines()[0])
    change(record)
    broken = tmp_path / "set.jsonl"
    broken.write_text(json.dumps(record) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=complaint) as raised:
        load(broken)
    assert "set.jsonl:1" in str(raised.value)


def test_a_line_maps_to_the_client_id_the_importer_gives_its_message(tmp_path: Path) -> None:
    """The harness finds an answer line's stored message by the id the parser assigns."""
    claude = tmp_path / "claude.jsonl"
    lines = [
        {
            "type": "user",
            "uuid": "u-1",
            "sessionId": "s",
            "message": {"role": "user", "content": "hi"},
        },
        {"type": "progress", "sessionId": "s"},
        {
            "type": "assistant",
            "uuid": "a-1",
            "sessionId": "s",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "hello"}]},
        },
    ]
    claude.write_text("".join(json.dumps(v) + "\n" for v in lines), encoding="utf-8")
    pi = tmp_path / "pi.jsonl"
    entries = [
        {"type": "session", "id": "sess", "timestamp": "2025-01-01T00:00:00Z", "cwd": "/"},
        {
            "type": "message",
            "timestamp": "2025-01-01T00:00:01Z",
            "message": {"role": "user", "content": "q"},
        },
        {
            "type": "message",
            "timestamp": "2025-01-01T00:00:02Z",
            "message": {"role": "user", "content": "q"},
        },
    ]
    pi.write_text("".join(json.dumps(v) + "\n" for v in entries), encoding="utf-8")
    for path, message_lines in ((claude, [1, 3]), (pi, [2, 3])):
        parsed = parse_transcript(path.read_bytes())
        by_line = line_client_ids(path)
        assert [m.client_id for m in parsed.messages] == [by_line[n] for n in message_lines]

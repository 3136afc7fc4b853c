"""Patterns and full-text queries, validated before any SQL runs."""

from __future__ import annotations

import time

import pytest

from lcm.errors import InvalidInput
from lcm.retrieval.query import (
    compile_regex,
    fts5_expression,
    highlight_pattern,
    parse_text_query,
    regex_syntax_in,
    required_literals,
)
from lcm.retrieval.snippets import build_snippet


def test_catastrophic_pattern_runs_in_linear_time() -> None:
    regex = compile_regex("(a+)+$", 1_000)
    text = "a" * 100_000
    started = time.perf_counter()
    assert regex.spans(text) == [(0, 100_000)]
    assert regex.spans(text + "b") == []
    assert time.perf_counter() - started < 0.5


@pytest.mark.parametrize(
    ("pattern", "code"),
    [
        (r"(a)\1", "invalid_pattern"),  # backreference
        ("(?=x)y", "invalid_pattern"),  # lookahead
        ("(?<=a)b", "invalid_pattern"),  # lookbehind
        ("[unclosed", "invalid_pattern"),
        ("", "invalid_pattern"),
        ("x" * 1_001, "pattern_too_long"),
    ],
)
def test_refused_patterns_say_why(pattern: str, code: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        compile_regex(pattern, 1_000)
    assert caught.value.code == code


@pytest.mark.parametrize(
    ("pattern", "literals"),
    [
        (r"deploy.*staging", ("deploy", "staging")),
        (r"src/app\.py", ("src/app.py",)),
        (r"foo(bar|baz)+qux", ("foo", "qux")),  # the alternation is not required
        (r"(?i)ERROR \d+", ("ERROR ",)),
        (r"(x)?abcd", ("abcd",)),
        (r"ab", ()),  # too short for a trigram index
        (r"a.b.c", ()),
        (r"100%_done", ("100", "done")),  # LIKE wildcards split out, never escaped
        (r"(?i)ÉTÉ", ()),  # SQLite's LIKE cannot fold non-ASCII case
        (r"\Qliteral\E", ()),  # RE2-only syntax: no prefilter, still correct
    ],
)
def test_required_literals(pattern: str, literals: tuple[str, ...]) -> None:
    assert set(required_literals(pattern)) == set(literals)


def test_web_search_syntax() -> None:
    query = parse_text_query('deploy "staging server" -prod cache OR redis')
    assert [[t.text for t in g] for g in query.groups] == [
        ["deploy"],
        ["staging server"],
        ["cache", "redis"],
    ]
    assert [t.text for t in query.excluded] == ["prod"]
    assert query.phrase_text == "deploy staging server cache redis"
    assert fts5_expression(query) == (
        '("deploy" AND "staging server" AND ("cache" OR "redis")) NOT "prod"'
    )


@pytest.mark.parametrize(
    "query", ["foo.*bar", r"\d+ errors", "[abc]x", "a|b", "^start", "end$", "x{2,3}", "deploy*"]
)
def test_regex_syntax_is_refused_in_full_text(query: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_text_query(query)
    assert caught.value.code == "use_regex_mode"
    assert "regex" in caught.value.message


@pytest.mark.parametrize(
    "query", ["why did the build fail?", "C++ templates", "src/app.py", "部署 生产", "e-mail"]
)
def test_ordinary_questions_are_not_mistaken_for_regex(query: str) -> None:
    assert regex_syntax_in(query) is None
    parse_text_query(query)


def test_a_query_of_punctuation_has_nothing_to_find() -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_text_query('- "" ...')
    assert caught.value.code == "empty_query"


def test_quotes_inside_terms_cannot_break_out_of_fts5_strings() -> None:
    query = parse_text_query('say"hello NEAR(x')
    assert fts5_expression(query) == '"say""hello" AND "NEAR(x"'


def test_cjk_queries_are_flagged_for_trigram_search() -> None:
    assert parse_text_query("部署").cjk
    assert parse_text_query("デプロイ").cjk
    assert not parse_text_query("deploy").cjk


def test_snippet_marks_matches_around_the_first() -> None:
    content = "x" * 500 + " the staging server broke " + "y" * 500
    query = parse_text_query("staging servers")
    spans = [m.span() for m in highlight_pattern(query).finditer(content)]
    snippet = build_snippet(content, spans)
    assert "«staging» «server»" in snippet
    assert snippet.startswith("…")
    assert snippet.endswith("…")
    assert len(snippet) <= 260


def test_snippet_without_match_is_the_start() -> None:
    assert build_snippet("short\ntext", []) == "short text"

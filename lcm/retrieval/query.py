"""What a grep asks for, validated before any SQL runs (pure; unit-tested without a database).

Regex mode compiles with RE2, whose matching time is linear in the text: a
pattern like ``(a+)+$`` cannot backtrack for hours. RE2 refuses what it cannot
do in linear time (backreferences, lookaround), and those refusals become a
400 saying so. Literal runs every match must contain are extracted so the
database's trigram index can prefilter rows before RE2 runs.

Full-text mode takes web-search syntax (terms are ANDed, ``"quoted phrases"``,
``-excluded``, ``a OR b``), the same language Postgres's
``websearch_to_tsquery`` reads; for SQLite it is translated into FTS5 syntax.
"""

from __future__ import annotations

import re
import re._constants as sre_constants
import re._parser as sre_parse
from dataclasses import dataclass
from typing import Any

from lcm.errors import InvalidInput
from lcm.re2_engine import RefusedPattern, compile_linear

# Han, Hiragana, Katakana, Hangul: scripts written without spaces between
# words, which word tokenizers cannot split; these go through trigram indexes.
_CJK = re.compile(
    "[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f]"
)
_MIN_PREFILTER_CHARS = 3  # a trigram index cannot use anything shorter
_MAX_PREFILTER_LITERALS = 3
_RE2_MAX_MEM = 16 << 20  # bytes of compiled program; refuses patterns that blow up

# Signs that a "full text" query is really a regular expression.
_REGEX_SIGNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\\[dDwWsSbB.*+?()\[\]{}|^$]"), "a backslash escape"),
    (re.compile(r"\.[*+?{]"), "a '.' wildcard"),
    (re.compile(r"\[[^\]\s]+\]"), "a character class"),
    (re.compile(r"\(\?"), "a group modifier"),
    (re.compile(r"\|"), "an alternation '|'"),
    (re.compile(r"^\^|\$$"), "an anchor"),
    (re.compile(r"\{\d+(,\d*)?\}"), "a repetition count"),
    (re.compile(r"[\w)]\*|\)[+?]"), "a quantifier"),
)
_TOKEN = re.compile(r'(-?)"([^"]*)"?|(\S+)')


def has_cjk(text: str) -> bool:
    return _CJK.search(text) is not None


# --- regex mode ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RegexQuery:
    """A compiled, accepted regex and the literals any match must contain."""

    pattern: str
    compiled: Any  # re2._Regexp (the binding ships no type stubs)
    literals: tuple[str, ...]

    def spans(self, text: str, limit: int = 20) -> list[tuple[int, int]]:
        spans = []
        for match in self.compiled.finditer(text):
            spans.append(match.span())
            if len(spans) >= limit:
                break
        return spans


def compile_regex(pattern: str, max_chars: int) -> RegexQuery:
    """Compile ``pattern`` with RE2 or refuse it with a 400 that says why."""
    if not pattern:
        raise InvalidInput("pattern must not be empty", code="invalid_pattern")
    if len(pattern) > max_chars:
        raise InvalidInput(
            f"pattern is {len(pattern)} characters; the limit is {max_chars}",
            code="pattern_too_long",
        )
    try:
        compiled = compile_linear(pattern, _RE2_MAX_MEM)
    except RefusedPattern as exc:
        raise InvalidInput(
            f"pattern refused by the RE2 engine ({exc.detail}); backreferences and lookaround "
            "are not supported because they cannot run in linear time",
            code="invalid_pattern",
        ) from exc
    return RegexQuery(pattern, compiled, required_literals(pattern))


def required_literals(pattern: str) -> tuple[str, ...]:
    """Literal substrings every match of ``pattern`` contains (longest first).

    Parsed with Python's own regex parser, whose syntax RE2's mostly shares;
    anything it cannot parse or that is not plainly a literal yields nothing,
    which only costs speed (no prefilter), never a missed match. Literals are
    returned only when matching them case-insensitively is a superset of the
    pattern, which is how the prefilter (ILIKE / LIKE) compares them.
    """
    try:
        parsed = sre_parse.parse(pattern)
    except (re.error, RecursionError, OverflowError):
        return ()
    ignore_case = bool(parsed.state.flags & sre_constants.SRE_FLAG_IGNORECASE)
    runs: list[str] = []
    _collect(list(parsed), ignore_case, runs)
    usable = sorted(
        {run for run in runs if len(run) >= _MIN_PREFILTER_CHARS and "%" not in run},
        key=lambda r: (-len(r), r),
    )
    return tuple(usable[:_MAX_PREFILTER_LITERALS])


def _collect(nodes: list[tuple[Any, Any]], ignore_case: bool, runs: list[str]) -> None:
    current: list[str] = []

    def flush() -> None:
        if current:
            runs.extend(_split_like_specials("".join(current)))
            current.clear()

    for op, arg in nodes:
        if op is sre_constants.LITERAL and not (ignore_case and arg > 127):
            # SQLite's LIKE folds ASCII case only: a case-insensitive non-ASCII
            # literal could miss rows, so it ends the run instead.
            current.append(chr(arg))
            continue
        flush()
        if op is sre_constants.SUBPATTERN:
            _group, add_flags, _del_flags, sub = arg
            nested_ic = ignore_case or bool(add_flags & sre_constants.SRE_FLAG_IGNORECASE)
            _collect(list(sub), nested_ic, runs)
        elif op in (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT) and arg[0] >= 1:
            _collect(list(arg[2]), ignore_case, runs)
    flush()


def _split_like_specials(run: str) -> list[str]:
    # LIKE wildcards and its escape character are split out rather than
    # escaped: trigram indexes on both databases ignore an ESCAPE clause.
    return [part for part in re.split(r"[%_\\]", run) if part]


# --- full-text mode ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Term:
    """A word or a quoted phrase of a full-text query."""

    text: str
    phrase: bool = False


@dataclass(frozen=True, slots=True)
class TextQuery:
    """A parsed web-search query: AND of OR-groups of terms, minus excluded terms."""

    raw: str
    groups: tuple[tuple[Term, ...], ...]
    excluded: tuple[Term, ...]

    @property
    def cjk(self) -> bool:
        """True when any term is CJK text: such queries match by substring (trigrams)."""
        return has_cjk(self.raw)

    @property
    def positive_terms(self) -> list[Term]:
        return [term for group in self.groups for term in group]

    @property
    def phrase_text(self) -> str:
        """Every positive term in order: rows holding this contiguous rank first."""
        return " ".join(term.text for term in self.positive_terms)


def regex_syntax_in(query: str) -> str | None:
    """What makes ``query`` look like a regular expression, or ``None``."""
    stripped = query.strip()
    for sign, name in _REGEX_SIGNS:
        if sign.search(stripped):
            return name
    return None


def parse_text_query(query: str) -> TextQuery:
    """Parse web-search syntax; refuse regex syntax and queries with nothing to find."""
    sign = regex_syntax_in(query)
    if sign is not None:
        raise InvalidInput(
            f"this full-text query contains {sign}, which is regular-expression syntax; "
            'use "mode": "regex" for patterns (full text takes words, "quoted phrases", '
            "-excluded words and OR)",
            code="use_regex_mode",
        )
    groups: list[list[Term]] = []
    excluded: list[Term] = []
    join_next = False
    for match in _TOKEN.finditer(query):
        negated, quoted, word = match.group(1), match.group(2), match.group(3)
        if word is not None and word.upper() == "OR":
            join_next = bool(groups)
            continue
        if quoted is not None:
            term, is_negated = Term(" ".join(quoted.split()), phrase=True), bool(negated)
        else:
            is_negated = word.startswith("-") and len(word) > 1
            term = Term(word[1:] if is_negated else word)
        if not _searchable(term.text):
            continue
        if is_negated:
            excluded.append(term)
        elif join_next:
            groups[-1].append(term)
        else:
            groups.append([term])
        join_next = False
    if not groups:
        raise InvalidInput("the full-text query has no word to search for", code="empty_query")
    return TextQuery(query, tuple(tuple(g) for g in groups), tuple(excluded))


def _searchable(text: str) -> bool:
    return any(ch.isalnum() for ch in text)


def fts5_expression(query: TextQuery) -> str:
    """The query in SQLite FTS5 syntax: every term a quoted string, operators explicit."""
    clauses = []
    for group in query.groups:
        alternatives = " OR ".join(_fts5_string(term.text) for term in group)
        clauses.append(f"({alternatives})" if len(group) > 1 else alternatives)
    expression = " AND ".join(clauses)
    for term in query.excluded:
        expression = f"({expression}) NOT {_fts5_string(term.text)}"
    return expression


def fts5_phrase(query: TextQuery) -> str:
    return _fts5_string(query.phrase_text)


def _fts5_string(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def highlight_pattern(query: TextQuery) -> re.Pattern[str]:
    """A pattern finding the query's words in text, loosely stemmed, for snippets.

    Built only from escaped literals, so Python's engine runs it in linear time.
    """
    alternatives: list[str] = []
    for term in query.positive_terms:
        for word in term.text.split():
            if has_cjk(word):
                alternatives.append(re.escape(word))
            else:
                alternatives.append(r"\b" + re.escape(_stem(word)) + r"\w*")
    return re.compile("|".join(sorted(set(alternatives), key=len, reverse=True)), re.IGNORECASE)


def _stem(word: str) -> str:
    lowered = word.lower()
    for suffix in ("ing", "ed", "es", "s"):
        if lowered.endswith(suffix) and len(lowered) - len(suffix) >= 3:
            return lowered[: -len(suffix)]
    return lowered

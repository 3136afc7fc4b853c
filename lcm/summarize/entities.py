"""Recognisers for the facts a summary must not lose: timestamps, paths, URLs, numbers, names.

Shared by the extractive backend (what to keep) and the footer (what to offer
for expansion). Every function returns matches unique and in order of first
appearance, so callers stay deterministic.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

TIMESTAMP_RE = re.compile(
    r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
    r"|\b\d{1,2}:\d{2}(?::\d{2})?\b"
)
URL_RE = re.compile(r"\bhttps?://[^\s<>\"'`)\]]+")
# A path either has a slash between name parts or ends in a file extension.
# The extension needs a letter then one more character, so "3.14" and "e.g" are not files.
PATH_RE = re.compile(
    r"(?:~|\.{1,2})?/?(?:[\w.@-]+/)+[\w.@-]+"
    r"|\b[\w-]+(?:\.[\w-]+)*\.[A-Za-z][A-Za-z0-9]{1,7}\b"
)
NUMBER_RE = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*%?(?![\w])")
# Capitalised words and CamelCase or ALLCAPS identifiers, possibly several in a row
# ("Alice Chen", "PostgreSQL", "TODO").
NAME_RE = re.compile(r"\b[A-Z][\w-]*(?:[ \t]+[A-Z][\w-]*)*")


def _word_set(words: str) -> frozenset[str]:
    return frozenset(words.split())


# Capitalised function words that start sentences: not names.
_NOT_NAMES = _word_set(
    """a an and are as at be but by can could did do does for from had has have he her
    here his how i if in is it its let me my no not now of ok okay on or our she so
    that the their then there these they this those to too was we were what when where
    which while who why will with would yes you your also after before all any each
    just maybe please sure thanks thank done next first then user assistant system tool
    summary expand"""
)
# Latin-script words (CJK text has no spaces, so \w would swallow whole clauses).
_WORD_RE = re.compile("[A-Za-z\u00c0-\u024f][A-Za-z0-9\u00c0-\u024f_'-]{3,}")
# Runs of CJK ideographs / kana / hangul: the "words" of text without spaces.
_CJK_RUN_RE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]{2,}")
_COMMON_WORDS = _NOT_NAMES | _word_set(
    """about above again because been being below between both could should would
    into more most much only other over same some such than them very went were
    which while with without make made need needs want wants using used like
    going know think yeah right well still onto good great sounds thing things sure
    help happy moment really actually something anything everything look looks
    looking take give doing thanks time fine back"""
)


def unique(items: Iterable[str]) -> list[str]:
    """Items without repeats, in order of first appearance."""
    return list(dict.fromkeys(item for item in items if item))


def find_timestamps(text: str) -> list[str]:
    """Dates, date-times and clock times."""
    return unique(m.group(0) for m in TIMESTAMP_RE.finditer(text))


def find_urls(text: str) -> list[str]:
    """http(s) URLs, trailing punctuation removed."""
    return unique(m.group(0).rstrip(".,;:!?") for m in URL_RE.finditer(text))


def find_paths(text: str) -> list[str]:
    """File and directory paths (URLs and dates excluded)."""
    without_urls = URL_RE.sub(" ", text)
    found = []
    for match in PATH_RE.finditer(without_urls):
        path = match.group(0).rstrip(".,;:")
        # "2024/05/01" or "1/2" have a slash but name no file.
        if any(ch.isalpha() for ch in path) and not path.startswith("@"):
            found.append(path)
    return unique(found)


def find_numbers(text: str) -> list[str]:
    """Standalone numbers (amounts, counts, versions, percentages), not parts of timestamps."""
    without_times = TIMESTAMP_RE.sub(" ", text)
    return unique(m.group(0) for m in NUMBER_RE.finditer(without_times))


def _starts_sentence(text: str, index: int) -> bool:
    before = text[:index].rstrip(" \t\"'(")
    return not before or before[-1] in ".!?:;\n"


def _looks_like_identifier(word: str) -> bool:
    """CamelCase, ALLCAPS or containing digits: a name wherever it stands."""
    return any(ch.isupper() or ch.isdigit() for ch in word[1:])


def find_names(text: str) -> list[str]:
    """Capitalised words and identifiers that are likely names, not sentence starts.

    A lone capitalised word opening a sentence ("Traceback", "Great") is only
    capitalised by grammar, so it counts only if it also looks like an identifier.
    """
    names = []
    cleaned = URL_RE.sub(" ", text)
    for match in NAME_RE.finditer(cleaned):
        words = [w for w in match.group(0).split() if w.lower() not in _NOT_NAMES]
        if not words:
            continue
        lone_opener = len(words) == 1 and _starts_sentence(cleaned, match.start())
        if lone_opener and not _looks_like_identifier(words[0]):
            continue
        names.append(" ".join(words))
    return unique(names)


def frequent_words(text: str, limit: int) -> list[str]:
    """The most frequent content words (or CJK runs), ties broken by first appearance."""
    counts: dict[str, int] = {}
    for match in _WORD_RE.finditer(text):
        word = match.group(0).lower()
        if word not in _COMMON_WORDS:
            counts[word] = counts.get(word, 0) + 1
    for match in _CJK_RUN_RE.finditer(text):
        run = match.group(0)[:6]
        counts[run] = counts.get(run, 0) + 1
    # dict preserves first-appearance order and sorted() is stable, so ties are deterministic.
    ranked = sorted(counts.items(), key=lambda item: -item[1])
    return [word for word, count in ranked if count > 1][:limit]

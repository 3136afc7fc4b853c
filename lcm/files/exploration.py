"""Exploration summaries: what a stored file is, in about 200 tokens, without reading it all.

Structured files get a deterministic structure summary (JSON: shape and keys;
CSV: rows, columns and their types; code: language, imports and definitions),
which is exact and costs no LLM call. Prose goes to the summarizer (see
:mod:`lcm.files.service`); :func:`prose_fallback` is what it falls back to.
Same input, same output: nothing here depends on time or randomness.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections import Counter
from typing import Any, Literal

from lcm.summarize.truncation import clip_to_tokens

FileKind = Literal["json", "csv", "code", "prose"]
SUMMARY_TOKENS = 300

LANGUAGES = {
    "py": "Python", "js": "JavaScript", "mjs": "JavaScript", "jsx": "JavaScript",
    "ts": "TypeScript", "tsx": "TypeScript", "go": "Go", "rs": "Rust", "java": "Java",
    "kt": "Kotlin", "c": "C", "h": "C", "cc": "C++", "cpp": "C++", "hpp": "C++",
    "cs": "C#", "rb": "Ruby", "php": "PHP", "swift": "Swift", "scala": "Scala",
    "sh": "Shell", "bash": "Shell", "sql": "SQL", "lua": "Lua", "ex": "Elixir",
}  # fmt: skip
JSON_EXTS = frozenset({"json", "jsonl", "ndjson", "geojson"})
DELIMITERS = {"csv": ",", "tsv": "\t"}
_IMPORT_RE = re.compile(
    r"^\s*(?:import\s+\S|from\s+\S+\s+import\s|#include\s|use\s+[\w:]+|require\(|"
    r"const\s+\w+\s*=\s*require\()"
)
_DEF_RE = re.compile(
    r"^\s*(?:export\s+)?(?:default\s+)?(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?"
    r"(def|class|function|fn|func|struct|interface|enum|trait|type|impl|module)\s+"
    r"(?:\([^)]*\)\s*)?([A-Za-z_$][\w$]*)"
)
_CODE_LINE_RE = re.compile(r"[;{}]\s*$|^\s*(?:def|class|import|from|return|if|for|#include)\b")
_HEADING_RE = re.compile(r"^(?:#{1,6}\s+\S.*|[A-Z0-9][A-Z0-9 :_-]{5,})$")


def classify(name: str | None, mime: str | None, ext: str | None, text: str) -> FileKind:
    """The file's kind from its extension or type, else from its content."""
    ext, mime = (ext or "").lower(), (mime or "").lower()
    if ext in JSON_EXTS or "json" in mime:
        return "json"
    if ext in DELIMITERS or mime in ("text/csv", "text/tab-separated-values"):
        return "csv"
    if ext in LANGUAGES or any(t in mime for t in ("python", "javascript", "typescript", "x-c")):
        return "code"
    if ext in ("md", "txt", "rst", "html", "htm") or mime.startswith("text/"):
        return "prose"
    if text.lstrip()[:1] in ("{", "[") and _json_records(text) is not None:
        return "json"
    if _delimiter(text) is not None:
        return "csv"
    lines = [ln for ln in text.splitlines()[:200] if ln.strip()]
    if lines and sum(1 for ln in lines if _CODE_LINE_RE.search(ln)) >= 0.3 * len(lines):
        return "code"
    return "prose"


def explore(kind: FileKind, text: str, name: str | None, ext: str | None) -> str:
    """The deterministic summary for ``kind`` (prose gets :func:`prose_fallback`)."""
    if kind == "json":
        body = explore_json(text)
    elif kind == "csv":
        body = explore_csv(text, DELIMITERS.get((ext or "").lower()) or _delimiter(text) or ",")
    elif kind == "code":
        body = explore_code(text, name, ext)
    else:
        body = prose_fallback(text, name)
    return clip_to_tokens(body, SUMMARY_TOKENS)


def _json_records(text: str) -> list[Any] | None:
    """The document as one value, or NDJSON as a list of values; None if neither."""
    try:
        return [json.loads(text)]
    except ValueError:
        pass
    lines = [ln for ln in text.splitlines() if ln.strip()]
    try:
        return [json.loads(ln) for ln in lines] if len(lines) > 1 else None
    except ValueError:
        return None


def _shape(value: Any, depth: int = 0) -> str:
    if isinstance(value, dict):
        keys = list(value)
        more = f", +{len(keys) - 6}" if len(keys) > 6 else ""
        return f"object{{{', '.join(str(k) for k in keys[:6])}{more}}}"
    if isinstance(value, list):
        inner = f" of {_shape(value[0], depth + 1)}" if value and depth < 2 else ""
        return f"array[{len(value):,}]{inner}"
    if isinstance(value, bool) or value is None:
        return "boolean" if isinstance(value, bool) else "null"
    if isinstance(value, int | float):
        return f"number ({value})" if depth == 0 else "number"
    text = str(value)
    return f'string "{text[:40]}"' if depth == 0 and len(text) <= 40 else "string"


def explore_json(text: str) -> str:
    records = _json_records(text)
    if records is None:
        return "JSON file that does not parse as JSON; " + prose_fallback(text, None)
    if len(records) > 1:
        keys: Counter[str] = Counter(k for r in records if isinstance(r, dict) for k in r)
        common = ", ".join(f"{k} ({n:,})" for k, n in keys.most_common(15))
        return f"NDJSON: {len(records):,} records. Keys by frequency: {common or 'none'}."
    data = records[0]
    if isinstance(data, dict):
        fields = "; ".join(f"{k}: {_shape(v, 1)}" for k, v in list(data.items())[:15])
        more = f" (+{len(data) - 15} more keys)" if len(data) > 15 else ""
        return f"JSON object with {len(data):,} keys. {fields}{more}."
    if isinstance(data, list):
        types = Counter(_shape(v, 3).split("{")[0].split("[")[0] for v in data)
        counts = ", ".join(f"{t} {n:,}" for t, n in types.most_common())
        lines = [f"JSON array of {len(data):,} items ({counts})."]
        item_keys: Counter[str] = Counter(k for v in data if isinstance(v, dict) for k in v)
        if item_keys:
            sample = next(v for v in data if isinstance(v, dict))
            described = ", ".join(
                f"{k} ({_shape(sample.get(k), 2)}, {n:,})" for k, n in item_keys.most_common(15)
            )
            lines.append(f"Item keys: {described}.")
        return " ".join(lines)
    return f"JSON scalar: {_shape(data)}."


def _delimiter(text: str) -> str | None:
    sample = [ln for ln in text.splitlines()[:12] if ln.strip()]
    if len(sample) < 3:
        return None
    for delimiter in (",", "\t", ";", "|"):
        widths = {len(row) for row in csv.reader(sample, delimiter=delimiter)}
        if len(widths) == 1 and widths.pop() >= 2:
            return delimiter
    return None


def _column(values: list[str]) -> str:
    for cast, label in ((int, "integer"), (float, "number")):
        try:
            numbers = [cast(v) for v in values]
        except ValueError:
            continue
        return f"{label} {min(numbers)}..{max(numbers)}" if numbers else label
    counts = Counter(values)
    common = ", ".join(f'"{v[:24]}"' for v, _ in counts.most_common(2))
    return f"text, {len(counts):,} distinct, e.g. {common}" if counts else "empty"


def explore_csv(text: str, delimiter: str) -> str:
    reader = csv.reader(io.StringIO(text), delimiter=delimiter)
    rows = [r for r in reader if any(c.strip() for c in r)]
    if not rows:
        return "Delimited table with no rows."
    header, data = rows[0], rows[1:]
    columns = []
    for i, title in enumerate(header[:20]):
        values = [r[i].strip() for r in data if i < len(r) and r[i].strip()]
        columns.append(f"{title.strip() or f'#{i + 1}'} ({_column(values)})")
    more = f" (+{len(header) - 20} more)" if len(header) > 20 else ""
    sep = {",": "comma", "\t": "tab", ";": "semicolon", "|": "pipe"}.get(delimiter, delimiter)
    return (
        f"Table ({sep}-separated): {len(data):,} rows x {len(header)} columns. "
        f"Columns: {'; '.join(columns)}{more}."
    )


def explore_code(text: str, name: str | None, ext: str | None) -> str:
    lines = text.splitlines()
    language = LANGUAGES.get((ext or "").lower(), "Source code")
    imports = list(dict.fromkeys(ln.strip()[:80] for ln in lines if _IMPORT_RE.match(ln)))
    definitions = list(
        dict.fromkeys(f"{m.group(1)} {m.group(2)}" for ln in lines if (m := _DEF_RE.match(ln)))
    )
    todo = sum(1 for ln in lines if "TODO" in ln or "FIXME" in ln)
    parts = [
        f"{language}{f' ({name})' if name else ''}: {len(lines):,} lines "
        f"({sum(1 for ln in lines if ln.strip()):,} non-blank)."
    ]
    if imports:
        parts.append(f"Imports ({len(imports)}): {' | '.join(imports[:10])}.")
    if definitions:
        parts.append(f"Defines ({len(definitions)}): {', '.join(definitions[:30])}.")
    if todo:
        parts.append(f"TODO/FIXME markers: {todo}.")
    return " ".join(parts)


def prose_fallback(text: str, name: str | None) -> str:
    """Size, section headings, and how the text opens and ends."""
    lines = text.splitlines()
    headings = list(dict.fromkeys(ln.strip()[:60] for ln in lines if _HEADING_RE.match(ln.strip())))
    flat = " ".join(text.split())
    parts = [
        f"Text{f' ({name})' if name else ''}: {len(flat.split()):,} words, {len(lines):,} lines."
    ]
    if headings:
        parts.append(f"Sections: {' | '.join(headings[:12])}.")
    parts.append(f"Opens: {flat[:300]}")
    if len(flat) > 600:
        parts.append(f"Ends: {flat[-200:]}")
    return " ".join(parts)

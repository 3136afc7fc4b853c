"""Deterministic exploration summaries: exact facts about structure, bounded size."""

from __future__ import annotations

import json

from lcm.files.exploration import SUMMARY_TOKENS, classify, explore
from lcm.tokens import estimate_tokens


def test_json_object_and_array_shapes() -> None:
    doc = json.dumps(
        {"users": [{"id": i, "email": f"u{i}@x.io"} for i in range(1200)], "count": 1200}
    )
    summary = explore(classify("dump.json", None, "json", doc), doc, "dump.json", "json")
    assert "JSON object with 2 keys" in summary
    assert "users: array[1,200] of object{id, email}" in summary
    assert "count: number" in summary
    array = json.dumps([{"a": 1, "b": "x"}] * 30 + [7])
    summary = explore(classify(None, None, None, array), array, None, None)
    assert summary.startswith("JSON array of 31 items (object 30, number 1)")
    assert "a (number, 30)" in summary


def test_ndjson_is_recognised_by_content() -> None:
    text = "\n".join(json.dumps({"event": "click", "ts": i}) for i in range(50))
    assert classify(None, None, None, text) == "json"
    assert explore("json", text, None, None).startswith(
        "NDJSON: 50 records. Keys by frequency: event (50)"
    )


def test_csv_columns_and_types() -> None:
    rows = ["id,price,city"] + [
        f"{i},{i * 1.5},{'Paris' if i % 2 else 'Lyon'}" for i in range(1, 101)
    ]
    text = "\n".join(rows)
    assert classify(None, None, None, text) == "csv"
    summary = explore("csv", text, "sales.csv", "csv")
    assert "100 rows x 3 columns" in summary
    assert "id (integer 1..100)" in summary
    assert "price (number 1.5..150.0)" in summary
    assert 'city (text, 2 distinct, e.g. "Paris", "Lyon")' in summary


def test_code_imports_and_definitions() -> None:
    code = (
        "import os\nfrom x import y\n\nclass Store:\n    def get(self):\n        pass\n\n"
        "def main():\n    # TODO: args\n    pass\n"
    )
    assert classify("store.py", None, "py", code) == "code"
    summary = explore("code", code * 3, "store.py", "py")
    assert summary.startswith("Python (store.py): 30 lines")
    assert "Imports (2): import os | from x import y" in summary
    assert "Defines (3): class Store, def get, def main" in summary
    assert "TODO/FIXME markers: 3" in summary
    assert classify(None, None, None, "int main() {\n  return 0;\n}\n" * 20) == "code"


def test_prose_fallback_and_size_bound() -> None:
    text = "# Intro\nThis report covers the Q3 launch.\n## Risks\n" + "More detail here. " * 5000
    assert classify("report.md", None, "md", text) == "prose"
    summary = explore("prose", text, "report.md", "md")
    assert "Sections: # Intro | ## Risks" in summary
    assert "Opens: # Intro This report covers the Q3 launch." in summary
    assert estimate_tokens(summary) <= SUMMARY_TOKENS
    broken = '{"a": 1,'
    assert explore("json", broken * 10, "x.json", "json").startswith(
        "JSON file that does not parse"
    )

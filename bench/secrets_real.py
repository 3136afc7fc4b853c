"""``python -m bench secrets --real DIR``: the detector over real, untuned transcripts.

Every ``*.jsonl``, ``*.json`` and ``*.traj`` file under ``DIR`` is read; the
string values of each JSON document (a line of a JSONL file, or the whole
file) are what a gateway would send as message text and tool output, and
each is scanned as ingest scans a part. Printed: the findings by kind, the
text scanned, the detector's time per MB, and a sample of findings with the
text around each, for a hand check (true secret or false positive). The
project's tests never read these files: they are optional local data.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lcm.secrets.detector import detect

SUFFIXES = (".jsonl", ".json", ".traj")
CONTEXT = 40


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--real", type=Path, default=None, help="secrets: also scan the transcripts under DIR"
    )
    parser.add_argument(
        "--real-sample", type=int, default=60, help="secrets --real: findings shown for a check"
    )


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _documents(path: Path) -> Iterator[Any]:
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".jsonl":
        for line in text.splitlines():
            try:
                yield json.loads(line)
            except ValueError:
                yield line  # a line that is not JSON is scanned as text
    else:
        try:
            yield json.loads(text)
        except ValueError:
            yield text


def texts(root: Path) -> Iterator[tuple[str, str]]:
    """(file name, text) of every string value of every transcript under ``root``."""
    for path in sorted(p for p in root.rglob("*") if p.suffix in SUFFIXES and p.is_file()):
        for document in _documents(path):
            for text in _strings(document):
                if len(text) >= 8:
                    yield path.name, text


def run_real(args: argparse.Namespace) -> None:
    root: Path = args.real
    found: list[tuple[str, str, int, int, str]] = []  # file, text, start, end, kind
    scanned = 0
    seconds = 0.0
    for name, text in texts(root):
        scanned += len(text.encode("utf-8"))
        started = time.perf_counter()
        findings = detect(text)
        seconds += time.perf_counter() - started
        found.extend((name, text, f.start, f.end, f.kind) for f in findings)
    mb = scanned / 1e6
    print(f"  real transcripts under {root}: {mb:.1f} MB of text, {len(found)} findings")
    for kind, count in sorted(Counter(kind for *_, kind in found).items()):
        print(f"    {kind:<20} {count:>5}")
    print(f"  detector time: {seconds:.2f} s, {seconds / max(mb, 1e-9) * 1000:.0f} ms per MB")
    shown = random.Random(7).sample(found, min(args.real_sample, len(found)))
    print(f"  a sample of {len(shown)} findings (file, kind, value in context):")
    for i, (name, text, start, end, kind) in enumerate(sorted(shown, key=lambda f: f[4]), 1):
        before = text[max(0, start - CONTEXT) : start]
        after = text[end : end + CONTEXT]
        context = f"{before}>>>{text[start:end]}<<<{after}"
        print(f"   {i:>2}. {name} {kind}: {json.dumps(context)[:400]}")

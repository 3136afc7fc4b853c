"""Secret detection: recall and false positives over a synthetic corpus, and its cost.

The corpus (``bench.secrets_corpus``) plants fake but well-formed secrets of
each kind in realistic tool outputs, beside look-alikes that are not
secrets. Figures:

* recall by planted kind: the share of planted values a finding covers
  whole (a finding over part of a key leaves the rest readable);
* false positives by look-alike kind: the share of look-alike samples with
  any finding, and the findings in secret samples that cover no planted
  value;
* throughput: ``lcm.secrets.detect`` over the corpus text in KB/s, and per
  KB, next to the reference: one plain ``re`` pass of the hand-written
  patterns over the same text (what a scan costs without the plugins).
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from collections import defaultdict

from bench.secrets_corpus import Sample, build_corpus
from lcm.secrets.detector import Finding, detect
from lcm.secrets.patterns import HAND_PATTERNS


def _covered(text: str, value: str, findings: list[Finding]) -> bool:
    """Whether every occurrence of ``value`` in ``text`` lies inside one finding."""
    start = text.find(value)
    if start < 0:
        raise ValueError(f"the corpus lost a planted value: {value[:12]}…")
    while start >= 0:
        end = start + len(value)
        if not any(f.start <= start and end <= f.end for f in findings):
            return False
        start = text.find(value, end)
    return True


def _stray(sample: Sample, findings: list[Finding]) -> int:
    """Findings in a secret sample that overlap no planted value."""
    spans = []
    for value in sample.secrets:
        at = sample.text.find(value)
        while at >= 0:
            spans.append((at, at + len(value)))
            at = sample.text.find(value, at + 1)
    return sum(1 for f in findings if not any(f.start < e and s < f.end for s, e in spans))


def score(corpus: list[Sample]) -> tuple[dict[str, list[int]], dict[str, list[int]], int]:
    """(recall by kind: [found, planted]; false positives by kind: [flagged, samples], strays)."""
    recall: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    false: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    strays = 0
    for sample in corpus:
        findings = detect(sample.text)
        if sample.secrets:
            for value in sample.secrets:
                recall[sample.kind][1] += 1
                recall[sample.kind][0] += _covered(sample.text, value, findings)
            strays += _stray(sample, findings)
        else:
            false[sample.kind][1] += 1
            false[sample.kind][0] += bool(findings)
    return dict(recall), dict(false), strays


def _reference(text: str) -> int:
    return sum(1 for pattern, _ in HAND_PATTERNS for _ in pattern.finditer(text))


def _kb_per_second(text: str, scan: object, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        began = time.perf_counter()
        scan(text)  # type: ignore[operator]
        runs.append(time.perf_counter() - began)
    return len(text.encode("utf-8")) / 1024 / statistics.median(runs)


def run(args: argparse.Namespace) -> None:
    corpus = build_corpus()
    recall, false, strays = score(corpus)
    found = sum(f for f, _ in recall.values())
    planted = sum(n for _, n in recall.values())
    print(f"  corpus: {len(corpus)} samples, {planted} planted secrets", flush=True)
    for kind, (hit, total) in sorted(recall.items()):
        print(f"  recall {kind:<18} {hit:>3}/{total:<3} {hit / total:6.1%}")
    print(f"  recall, all kinds        {found:>3}/{planted:<3} {found / planted:6.1%}")
    flagged = sum(f for f, _ in false.values())
    samples = sum(n for _, n in false.values())
    for kind, (hit, total) in sorted(false.items()):
        print(f"  false positive {kind:<14} {hit:>3}/{total:<3} {hit / total:6.1%}")
    print(f"  false positives, look-alike samples {flagged}/{samples} {flagged / samples:6.1%}")
    print(f"  findings in secret samples covering no planted value: {strays}")
    text = "\n\n".join(s.text for s in corpus) * 4
    repeat = max(1, args.repeat)
    detector = _kb_per_second(text, detect, repeat)
    reference = _kb_per_second(text, _reference, repeat)
    print(
        f"  throughput ({len(text) // 1024} KB, median of {repeat}): detector {detector:,.0f} KB/s "
        f"({1e6 / detector:,.0f} µs/KB); reference (plain re, hand patterns) "
        f"{reference:,.0f} KB/s ({1e6 / reference:,.1f} µs/KB)"
    )


def mixed_text(corpus: list[Sample]) -> str:
    """The corpus as one text (what the tests scan to check offsets)."""
    return "\n\n".join(s.text for s in corpus)


_ = re  # the reference is ``re`` through HAND_PATTERNS

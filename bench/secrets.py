"""Secret detection: recall and false positives over a synthetic corpus, and its cost.

The corpus (``bench.secrets_corpus``) plants fake but well-formed secrets of
each kind in realistic tool outputs, beside look-alikes that are not
secrets. Figures:

* recall by planted kind: the share of planted values a finding covers
  whole (a finding over part of a key leaves the rest readable);
* false positives by look-alike kind: the share of look-alike samples with
  any finding, and the findings in secret samples that cover no planted
  value;
* throughput: ``lcm.secrets.detect`` in KB/s and µs per KB over the whole
  corpus (dense with secrets and ``key = "value"`` lines, the worst case)
  and over the look-alikes only (tool output without secrets), each next to
  the reference: one plain ``re`` pass of the hand-written patterns over the
  same text (what a scan costs without the plugins).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict
from collections.abc import Callable

from bench.secrets_corpus import Sample, build_corpus
from bench.secrets_real import run_real
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


def _kb_per_second(text: str, scan: Callable[[str], object], repeat: int) -> tuple[float, float]:
    """(median, best) KB/s of ``scan`` over ``text``: the best shows the cost on a busy host."""
    runs = []
    for _ in range(repeat):
        began = time.perf_counter()
        scan(text)
        runs.append(time.perf_counter() - began)
    kb = len(text.encode("utf-8")) / 1024
    return kb / statistics.median(runs), kb / min(runs)


def _figure(kb_per_second: tuple[float, float]) -> str:
    median, best = kb_per_second
    return f"{median:,.0f} KB/s ({1e6 / median:,.0f} µs/KB; best {1e6 / best:,.0f} µs/KB)"


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
    repeat = max(1, args.repeat)
    texts = {
        "whole corpus": mixed_text(corpus) * 4,
        "look-alikes only": mixed_text([s for s in corpus if not s.secrets]) * 8,
    }
    for name, text in texts.items():
        detector = _kb_per_second(text, detect, repeat)
        reference = _kb_per_second(text, _reference, repeat)
        print(f"  throughput, {name} ({len(text) // 1024} KB, median of {repeat}):")
        print(f"    detector {_figure(detector)}")
        print(f"    reference (plain re, hand patterns) {_figure(reference)}")
    if getattr(args, "real", None) is not None:
        run_real(args)


def mixed_text(corpus: list[Sample]) -> str:
    """The corpus as one text (what the tests scan to check offsets)."""
    return "\n\n".join(s.text for s in corpus)

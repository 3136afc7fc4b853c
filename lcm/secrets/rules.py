"""A tenant's detection rules: its custom patterns and its allow-list, ready to run.

Built from effective settings (``secrets_custom_patterns``,
``secrets_allow_list``; shapes in :mod:`lcm.secret_rules`) once per call
that detects. Compiled patterns are cached by their source, so a busy
ingest path compiles each pattern once per process.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from lcm.secret_rules import SecretControls, allow_list_hash, compile_secret_pattern
from lcm.secrets.detector import DETECTOR_VERSION, Finding


@lru_cache(maxsize=512)
def _compiled(pattern: str) -> Any:
    return compile_secret_pattern(pattern)


@dataclass(frozen=True, slots=True)
class DetectionRules:
    """Custom patterns (``(source, kind)``) and allow-listed value hashes."""

    patterns: tuple[tuple[str, str], ...] = ()
    allowed: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def of(cls, settings: SecretControls) -> DetectionRules:
        return cls(
            tuple((p.pattern, p.kind) for p in settings.secrets_custom_patterns),
            frozenset(settings.secrets_allow_list),
        )

    @property
    def version(self) -> str:
        """The detector's version with these rules: what a scan records as done.

        A change of the detector, a pattern or the allow-list changes it, so
        a later scan knows which conversations were scanned under other rules.
        """
        if not self.patterns and not self.allowed:
            return DETECTOR_VERSION
        source = repr((self.patterns, sorted(self.allowed))).encode()
        return f"{DETECTOR_VERSION}+{hashlib.sha256(source).hexdigest()[:12]}"

    def custom_findings(self, text: str) -> Iterator[Finding]:
        """What the custom patterns find: a pattern's group when it has one, else the match.

        RE2 matches in time linear in the text, so no pattern can stall a
        caller whatever it was written as.
        """
        for pattern, kind in self.patterns:
            compiled = _compiled(pattern)
            for match in compiled.finditer(text):
                start, end = match.span(1) if compiled.groups else match.span()
                if end > start:
                    yield Finding(start, end, kind)

    def allowed_out(self, text: str, found: Sequence[Finding]) -> list[Finding]:
        """``found`` without the findings whose value is allow-listed."""
        if not self.allowed:
            return list(found)
        return [f for f in found if allow_list_hash(text[f.start : f.end]) not in self.allowed]


NO_RULES = DetectionRules()

__all__ = ["NO_RULES", "DetectionRules"]

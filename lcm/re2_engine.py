"""Patterns from outside (grep's regex mode, tenants' secret patterns) compiled by RE2.

RE2 matches in linear time, so no pattern a caller sends can stall a search or
an ingest; it refuses what it cannot run that way (backreferences, lookaround).
"""

from __future__ import annotations

from typing import Any

import re2


class RefusedPattern(ValueError):
    """RE2 would not compile the pattern; ``detail`` is its own reason."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def compile_linear(pattern: str, max_mem: int) -> Any:
    """``pattern`` compiled by RE2 with at most ``max_mem`` bytes of program, quietly."""
    options = re2.Options()
    options.max_mem = max_mem
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        raw = exc.args[0] if exc.args else exc
        raise RefusedPattern(raw.decode() if isinstance(raw, bytes) else str(raw)) from exc

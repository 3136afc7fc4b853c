"""The doctor: broken, truncated and degraded summaries, listed and repaired in place."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lcm.exports import lazy_exports

if TYPE_CHECKING:
    from lcm.doctor.apply import apply_repairs
    from lcm.doctor.service import diagnose, request_repair
    from lcm.doctor.structure import repair_structure

__all__ = ["apply_repairs", "diagnose", "repair_structure", "request_repair"]

__getattr__ = lazy_exports(
    __name__,
    {
        "lcm.doctor.apply": ("apply_repairs",),
        "lcm.doctor.service": ("diagnose", "request_repair"),
        "lcm.doctor.structure": ("repair_structure",),
    },
)

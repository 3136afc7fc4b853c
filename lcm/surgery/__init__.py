"""An operator's summary surgery: rewrite a summary or its subtree, dissolve a condensed one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lcm.exports import lazy_exports

if TYPE_CHECKING:
    from lcm.surgery.service import (
        MAX_INSTRUCTIONS_CHARS,
        OperationView,
        SurgeryAsk,
        get_operation,
        perform_surgery,
        request_surgery,
        wait_for_operation,
    )

__all__ = [
    "MAX_INSTRUCTIONS_CHARS",
    "OperationView",
    "SurgeryAsk",
    "get_operation",
    "perform_surgery",
    "request_surgery",
    "wait_for_operation",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "lcm.surgery.service": (
            "MAX_INSTRUCTIONS_CHARS",
            "OperationView",
            "SurgeryAsk",
            "get_operation",
            "perform_surgery",
            "request_surgery",
            "wait_for_operation",
        ),
    },
)

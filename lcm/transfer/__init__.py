"""Moving a conversation out and back in: JSONL export and import (``service``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lcm.exports import lazy_exports

if TYPE_CHECKING:
    from lcm.transfer.export import export_lines
    from lcm.transfer.service import import_conversation, import_export, parse_export

__all__ = ["export_lines", "import_conversation", "import_export", "parse_export"]

__getattr__ = lazy_exports(
    __name__,
    {
        "lcm.transfer.export": ("export_lines",),
        "lcm.transfer.service": ("import_conversation", "import_export", "parse_export"),
    },
)

"""Assembly: building each turn's model context from summaries and the fresh tail."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lcm.exports import lazy_exports

if TYPE_CHECKING:
    from lcm.assembly.assembler import AssembledContext, assemble_context
    from lcm.assembly.normalize import api_violations
    from lcm.assembly.recall import RecalledSnippet
    from lcm.assembly.render import (
        TimeSpan,
        message_to_provider,
        render_summary,
        summary_context_tokens,
    )
    from lcm.assembly.replay import ReplayTarget
    from lcm.assembly.service import PromptCue, assemble

__all__ = [
    "AssembledContext",
    "PromptCue",
    "RecalledSnippet",
    "ReplayTarget",
    "TimeSpan",
    "api_violations",
    "assemble",
    "assemble_context",
    "message_to_provider",
    "render_summary",
    "summary_context_tokens",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "lcm.assembly.assembler": ("AssembledContext", "assemble_context"),
        "lcm.assembly.normalize": ("api_violations",),
        "lcm.assembly.recall": ("RecalledSnippet",),
        "lcm.assembly.render": (
            "TimeSpan",
            "message_to_provider",
            "render_summary",
            "summary_context_tokens",
        ),
        "lcm.assembly.replay": ("ReplayTarget",),
        "lcm.assembly.service": ("PromptCue", "assemble"),
    },
)

"""Assembly: building each turn's model context from summaries and the fresh tail."""

from lcm.assembly.assembler import AssembledContext, assemble_context
from lcm.assembly.normalize import api_violations
from lcm.assembly.render import (
    TimeSpan,
    message_to_provider,
    render_summary,
    summary_context_tokens,
)

__all__ = [
    "AssembledContext",
    "TimeSpan",
    "api_violations",
    "assemble_context",
    "message_to_provider",
    "render_summary",
    "summary_context_tokens",
]

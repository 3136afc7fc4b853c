"""The host's own model usage of a turn (``usage`` on ``…/turns``): stored and summed.

lcm's summaries cost tokens (``llm_usage``); the host's model calls cost far
more, and how much of each prompt its provider's cache served is what the
assembled context's stable prefix buys. The host reports it per turn; this
keeps one row per reported turn for the usage report and the console.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from lcm.tenants.usage_repository import UsageRepository


@dataclass(frozen=True, slots=True)
class HostTurnUsage:
    """One model call of the host, as its provider counted it.

    ``input_tokens`` are the prompt tokens billed at the full rate;
    ``cache_read_tokens`` and ``cache_write_tokens`` the prompt tokens its
    cache served and stored (Anthropic's ``cache_read_input_tokens`` and
    ``cache_creation_input_tokens``, OpenClaw's ``cacheRead``/``cacheWrite``).
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


def record_host_usage(
    session: Session,
    tenant_id: str,
    conversation_id: int,
    model: str | None,
    usage: HostTurnUsage,
) -> None:
    """Store the turn's reported usage in the caller's transaction (with its messages)."""
    UsageRepository(session).add_host_usage(
        tenant_id,
        conversation_id,
        model or "",
        (
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
        ),
    )

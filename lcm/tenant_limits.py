"""What one tenant may use, as deployment defaults a tenant's overrides layer on."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class TenantLimits(BaseSettings):
    """What one tenant may use: request rate and stored data (0 or None: unlimited).

    Deployment defaults here; a tenant's overrides (``PATCH /v1/tenant/settings``)
    layer on top, like the compaction knobs.
    """

    model_config = SettingsConfigDict(env_prefix="LCM_", extra="ignore")

    # Token bucket per tenant: refilled at ``rate_limit_per_second``, holding
    # at most ``rate_limit_burst`` requests (default: one second's worth).
    rate_limit_per_second: float | None = Field(None, ge=0, le=1_000_000)
    rate_limit_burst: int | None = Field(None, ge=0, le=1_000_000)
    # Stored messages and large-file bytes; a batch that would pass a quota
    # is refused whole (429 / 413 ``quota_exceeded``).
    max_stored_messages: int | None = Field(None, ge=0, le=10**15)
    max_file_bytes: int | None = Field(None, ge=0, le=10**18)
    # LLM tokens (input + output, summaries and expand-query) per UTC day.
    # Once spent, compaction goes on with the offline extractive summarizer
    # (summaries marked degraded "budget") and expand-query answers 429.
    llm_daily_token_budget: int | None = Field(None, ge=0, le=10**15)

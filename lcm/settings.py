"""The one settings object. Nothing else in the project reads the environment.

Every field can be set with an ``LCM_``-prefixed environment variable (or a
``.env`` file). Compaction fields follow lossless-claw's names and defaults so a
gateway operator recognises them; per-tenant overrides layer on top of these.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


def _default_home() -> Path:
    return Path.home() / ".lcm"


class CompactionSettings(BaseSettings):
    """The LCM knobs of DESIGN §3; also the shape of a per-tenant override."""

    model_config = SettingsConfigDict(env_prefix="LCM_", extra="ignore")

    context_threshold: float = Field(0.75, gt=0, le=1)
    fresh_tail_count: int = Field(64, ge=1)
    fresh_tail_max_tokens: int | None = Field(None, ge=1)
    leaf_min_fanout: int = Field(8, ge=2)
    leaf_chunk_tokens: int = Field(20_000, ge=256)
    condensed_min_fanout: int = Field(4, ge=2)
    condensed_min_fanout_hard: int = Field(2, ge=2)
    condensed_target_tokens: int = Field(2_000, ge=64)
    leaf_target_tokens: int = Field(1_200, ge=64)
    summary_prefix_target_tokens: int | None = Field(None, ge=1)
    sweep_max_depth: int = Field(1, ge=-1)
    max_rounds: int = Field(10, ge=1)
    truncation_tokens: int = Field(512, ge=32)
    large_file_token_threshold: int = Field(25_000, ge=1)
    new_session_retain_depth: int = Field(-1, ge=-1)
    max_expand_tokens: int = Field(4_000, ge=1)
    compaction_mode: Literal["deferred", "inline"] = "deferred"
    summary_model: str = "claude-haiku-4-5"
    summary_fallback_models: list[str] = Field(default_factory=list)
    custom_instructions: str = ""

    def prefix_target_tokens(self, token_budget: int) -> int:
        """``summary_prefix_target_tokens`` or its derived default (DESIGN §3)."""
        if self.summary_prefix_target_tokens is not None:
            return self.summary_prefix_target_tokens
        pressure_half = int(self.context_threshold * token_budget * 0.5)
        return max(self.condensed_target_tokens, min(self.leaf_chunk_tokens, pressure_half))


class Settings(CompactionSettings):
    """Process-wide settings: storage, broker, limits, LLM access."""

    model_config = SettingsConfigDict(env_prefix="LCM_", env_file=".env", extra="ignore")

    home: Path = Field(default_factory=_default_home)
    database_url: str = ""
    broker_url: str = "redis://localhost:6379/0"
    result_backend_url: str = ""

    # HTTP limits: a request above these is refused with 413, never half-written.
    max_body_bytes: int = Field(16 * 1024 * 1024, ge=1024)
    max_message_chars: int = Field(2_000_000, ge=1)
    max_batch_messages: int = Field(1_000, ge=1)
    max_session_key_chars: int = Field(512, ge=1)

    # Database pool; a search statement never runs longer than this.
    db_pool_size: int = Field(10, ge=1)
    db_max_overflow: int = Field(20, ge=0)
    sqlite_busy_timeout_ms: int = Field(30_000, ge=0)
    statement_timeout_ms: int = Field(5_000, ge=1)

    # Workers.
    worker_concurrency: int = Field(16, ge=1)
    lease_seconds: int = Field(300, ge=5)
    max_attempts: int = Field(5, ge=1)

    # LLM access. Without a key the offline extractive summarizer is used.
    anthropic_api_key: SecretStr | None = Field(None, validation_alias="ANTHROPIC_API_KEY")
    anthropic_base_url: str | None = None
    llm_timeout_seconds: float = Field(60.0, gt=0)
    llm_max_retries: int = Field(3, ge=0)
    llm_breaker_failures: int = Field(5, ge=1)
    llm_breaker_reset_seconds: float = Field(30.0, gt=0)
    # The SDK's current API version refuses sampling parameters; sending the
    # escalation temperatures (0.2, then 0.1) means pinning the older version.
    llm_send_temperature: bool = False

    log_level: str = "INFO"

    @field_validator("anthropic_api_key", mode="before")
    @classmethod
    def _blank_key_is_no_key(cls, value: object) -> object:
        # Compose passes ``ANTHROPIC_API_KEY=`` when the operator set none.
        return None if isinstance(value, str) and not value.strip() else value

    @model_validator(mode="after")
    def _fill_derived(self) -> Settings:
        if not self.database_url:
            self.database_url = f"sqlite:///{self.home / 'lcm.db'}"
        if not self.result_backend_url:
            self.result_backend_url = self.broker_url
        return self

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    @property
    def llm_available(self) -> bool:
        return self.anthropic_api_key is not None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read once."""
    return Settings()

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
from pydantic_settings import SettingsConfigDict

from lcm.injected_tags import DEFAULT_INJECTED_CONTEXT_TAGS as DEFAULT_INJECTED_CONTEXT_TAGS
from lcm.injected_tags import check_tag_names
from lcm.model_prices import DEFAULT_MODEL_PRICES as DEFAULT_MODEL_PRICES
from lcm.model_prices import ModelPrice as ModelPrice
from lcm.override_rules import MAX_TOKENS as MAX_TOKENS
from lcm.override_rules import ModelOverride as ModelOverride
from lcm.override_rules import SummaryModelOverride as SummaryModelOverride
from lcm.secret_rules import SecretControls
from lcm.semantic_settings import SemanticSettings, SemanticTenantSettings
from lcm.session_globs import session_pattern_problem
from lcm.summary_rules import SummaryModelRule, SummaryProviderName
from lcm.tenant_limits import TenantLimits as TenantLimits
from lcm.timezones import is_timezone


def _default_home() -> Path:
    return Path.home() / ".lcm"


class CompactionSettings(SecretControls):
    """The LCM knobs of docs/design.md §3 (and the secret controls); a tenant's override too."""

    model_config = SettingsConfigDict(env_prefix="LCM_", extra="ignore")

    context_threshold: float = Field(0.75, gt=0, le=1)
    fresh_tail_count: int = Field(64, ge=1, le=1_000_000)
    fresh_tail_max_tokens: int | None = Field(None, ge=1, le=MAX_TOKENS)
    leaf_min_fanout: int = Field(8, ge=2, le=100_000)
    leaf_chunk_tokens: int = Field(20_000, ge=256, le=MAX_TOKENS)
    condensed_min_fanout: int = Field(4, ge=2, le=10_000)
    condensed_min_fanout_hard: int = Field(2, ge=2, le=10_000)
    condensed_target_tokens: int = Field(2_000, ge=64, le=MAX_TOKENS)
    leaf_target_tokens: int = Field(1_200, ge=64, le=MAX_TOKENS)
    summary_prefix_target_tokens: int | None = Field(None, ge=1, le=MAX_TOKENS)
    sweep_max_depth: int = Field(1, ge=-1, le=1_000)
    max_rounds: int = Field(10, ge=1, le=10_000)
    truncation_tokens: int = Field(512, ge=32, le=MAX_TOKENS)
    # A summary over this many times its target escalates (aggressive, then
    # truncation) even when it is smaller than its input; None: no ceiling.
    summary_max_overage_factor: float | None = Field(3.0, ge=1, le=1_000)
    # Bounds of one sweep chain (all its rounds): passes, and wall time from
    # its first pass. On either the chain stops cleanly between passes; what
    # is still over the threshold is picked up by the next turn's debt.
    sweep_max_passes: int | None = Field(1_000, ge=1, le=1_000_000)
    sweep_max_seconds: float | None = Field(1_800.0, gt=0, le=86_400)
    # Summarization calls per conversation per window (None: unlimited). At
    # the limit the chain pauses: its debt waits, with a delayed wake-up,
    # until the oldest call of the window has left it and the backoff passed.
    summary_max_calls_per_window: int | None = Field(None, ge=1, le=1_000_000)
    summary_call_window_seconds: float = Field(600.0, gt=0, le=86_400)
    # Once that guard opens, no pass of the conversation runs for this long
    # after the call that filled the window (lcm/compaction/call_guard.py).
    summary_spend_backoff_seconds: float = Field(1_800.0, ge=0, le=86_400)
    # The largest token budget an assemble, turn or compact may use; a larger
    # requested budget is lowered to it (None: no cap).
    max_assembly_token_budget: int | None = Field(None, ge=1, le=MAX_TOKENS)
    large_file_token_threshold: int = Field(25_000, ge=1, le=MAX_TOKENS)
    new_session_retain_depth: int = Field(-1, ge=-1, le=1_000)
    max_expand_tokens: int = Field(4_000, ge=1, le=MAX_TOKENS)
    compaction_mode: Literal["deferred", "inline"] = "deferred"
    # Which provider writes summaries, and its models (primary, then fallbacks).
    summary_provider: SummaryProviderName = "anthropic"
    summary_model: str = Field("claude-haiku-4-5", min_length=1, max_length=200)
    summary_fallback_models: list[str] = Field(default_factory=list, max_length=10)
    # Cost-aware routing: other models for some depths (SummaryModelRule).
    summary_model_rules: list[SummaryModelRule] = Field(default_factory=list, max_length=20)
    # Large-file exploration summaries; unset: the summary provider and models.
    large_file_summary_provider: SummaryProviderName | None = None
    large_file_summary_model: str | None = Field(None, min_length=1, max_length=200)
    large_file_summary_fallback_models: list[str] = Field(default_factory=list, max_length=10)
    # The expand-query loop; unset: the summary provider and model.
    expansion_provider: SummaryProviderName | None = None
    expansion_model: str | None = Field(None, min_length=1, max_length=200)
    # Extended thinking on summary calls: Anthropic's ``thinking`` with this
    # budget; OpenAI-compatible models get ``reasoning_effort`` instead.
    enable_summary_thinking: bool = False
    summary_thinking_budget_tokens: int = Field(2_048, ge=1_024, le=100_000)
    summary_reasoning_effort: Literal["minimal", "low", "medium", "high"] = "low"
    custom_instructions: str = Field("", max_length=20_000)
    # IANA zone of the times the model reads (summaries, summarizer input); API stays UTC.
    timezone: str = Field("UTC", min_length=1, max_length=64)
    # Conversations with no message written for this many days are erased by
    # beat (``retention.sweep``); None keeps everything forever.
    retention_days: int | None = Field(None, ge=1, le=36_500)

    # Sessions (``lcm.conversations.patterns``): session-key globs whose writes
    # store nothing (ignore) or whose writes are dropped while reads work (stateless).
    ignore_session_patterns: list[str] = Field(default_factory=list, max_length=200)
    stateless_session_patterns: list[str] = Field(default_factory=list, max_length=200)
    # Threshold, fresh tail and leaf chunk by the model a call names (ModelOverride).
    model_overrides: list[ModelOverride] = Field(default_factory=list, max_length=100)
    # The summary model by session key (SummaryModelOverride): first match wins.
    summary_model_overrides: list[SummaryModelOverride] = Field(
        default_factory=list, max_length=100
    )

    # Content hygiene. Base64 images (image blocks, data: URLs in text) of at
    # least this many decoded bytes are stored as large files; 0 keeps them inline.
    large_image_bytes_threshold: int = Field(64 * 1024, ge=0, le=10**12)
    # XML tags whose blocks are removed from the summarizer's input (messages keep them).
    strip_injected_context_tags: list[str] = Field(
        default_factory=lambda: list(DEFAULT_INJECTED_CONTEXT_TAGS), max_length=100
    )
    # Leave heartbeat turns that only answered HEARTBEAT_OK out of assembly.
    prune_heartbeat_ok: bool = False
    # Id-less messages repeated identically inside one batch more than this
    # many times make the batch a replay flood (409): users, then other roles.
    replay_flood_threshold_external: int = Field(3, ge=1, le=100_000)
    replay_flood_threshold_internal: int = Field(32, ge=1, le=100_000)
    # Assembly: tool results outside the fresh tail above this many tokens are
    # sent as a stub naming the message (``expand``/``grep`` still reach it).
    stub_large_tool_payloads: bool = False
    stub_tool_payload_tokens: int = Field(2_000, ge=1, le=MAX_TOKENS)
    # Assembly with a ``prompt``: when the budget forces a choice, keep the evictable
    # items most relevant to it (grep's full-text relevance) over merely recent ones.
    # Off by default: the kept prefix then changes with every prompt (prompt cache).
    prompt_aware_eviction: bool = False
    # Identifiers a prompt names (CONSTANT_CASE, paths, ticket ids) that the
    # assembled window does not show are looked up in the raw history; at most
    # this many matching snippets are added when they fit the budget (0: off).
    prompt_recall_max_snippets: int = Field(4, ge=0, le=16)

    @field_validator("ignore_session_patterns", "stateless_session_patterns")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        for pattern in value:
            if (problem := session_pattern_problem(pattern)) is not None:
                raise ValueError(problem)
        return value

    @field_validator("timezone")
    @classmethod
    def _zone_name(cls, value: str) -> str:
        if not is_timezone(value):
            raise ValueError(f"not an IANA time zone name: {value[:64]!r}")
        return value

    @field_validator("strip_injected_context_tags")
    @classmethod
    def _tag_names(cls, value: list[str]) -> list[str]:
        return check_tag_names(value)

    def capped_budget(self, token_budget: int) -> int:
        """``token_budget`` lowered to ``max_assembly_token_budget`` (the operator's cap)."""
        cap = self.max_assembly_token_budget
        return token_budget if cap is None else min(token_budget, cap)

    def prefix_target_tokens(self, token_budget: int) -> int:
        """``summary_prefix_target_tokens`` or its derived default (docs/design.md §3)."""
        if self.summary_prefix_target_tokens is not None:
            return self.summary_prefix_target_tokens
        pressure_half = int(self.context_threshold * token_budget * 0.5)
        return max(self.condensed_target_tokens, min(self.leaf_chunk_tokens, pressure_half))


class TenantSettings(CompactionSettings, TenantLimits, SemanticTenantSettings):
    """Everything a tenant may override: the shape of ``PATCH /v1/tenant/settings``."""

    model_config = SettingsConfigDict(env_prefix="LCM_", extra="ignore")


class Settings(TenantSettings, SemanticSettings):
    """Process-wide settings: storage, broker, limits, LLM access."""

    model_config = SettingsConfigDict(env_prefix="LCM_", env_file=".env", extra="ignore")

    home: Path = Field(default_factory=_default_home)
    database_url: str = ""
    broker_url: str = "redis://localhost:6379/0"
    result_backend_url: str = ""

    # Seconds an API process remembers a key it found active (and its tenant's
    # settings): no database read per request. A revocation or settings change
    # holds at once in the process that made it, within this bound in the
    # others (lcm/tenants/key_cache.py). 0: read on every request.
    key_cache_seconds: float = Field(1.0, ge=0, le=60)

    # HTTP limits: a request above these is refused with 413, never half-written.
    max_body_bytes: int = Field(16 * 1024 * 1024, ge=1024)
    max_message_chars: int = Field(2_000_000, ge=1)
    max_batch_messages: int = Field(1_000, ge=1)
    max_session_key_chars: int = Field(512, ge=1)
    # The Redis the per-tenant rate limit buckets live in, shared by every API
    # process. Default: the broker when it is Redis; otherwise (embedded mode)
    # each process keeps its buckets in memory.
    rate_limit_redis_url: str = ""
    # Estimated cost in ``GET /v1/tenant/usage``.
    model_prices: dict[str, ModelPrice] = Field(default_factory=lambda: dict(DEFAULT_MODEL_PRICES))

    # Database pool; a search statement never runs longer than this.
    db_pool_size: int = Field(10, ge=1)
    db_max_overflow: int = Field(20, ge=0)
    # Off behind a pooler in transaction mode that does not track prepared
    # statements (PgBouncer before 1.22, or with max_prepared_statements = 0).
    db_prepared_statements: bool = True
    sqlite_busy_timeout_ms: int = Field(30_000, ge=0)
    # SQLite's page cache per connection (MB; 0: SQLite's 2 MB). Filled as
    # pages are read, so an idle connection costs little (lcm/db/engine.py).
    sqlite_cache_mb: int = Field(32, ge=0, le=65_536)
    statement_timeout_ms: int = Field(5_000, ge=1)
    # Message views a process keeps (lcm/message_cache.py; 0: none).
    message_cache_size: int = Field(20_000, ge=0)
    # Context entries in the assembly windows a process keeps, one window per
    # conversation (lcm/window_cache.py; 0: none).
    window_cache_size: int = Field(20_000, ge=0)

    # Heavy requests (grep, export; bootstrap, import) each API process runs
    # at once: per tenant and kind, and in all; a request waiting longer
    # than heavy_wait_seconds for its slot is refused with 429 (api/heavy_work.py).
    heavy_reads_per_tenant: int = Field(2, ge=1)
    heavy_writes_per_tenant: int = Field(1, ge=1)
    heavy_requests_total: int = Field(4, ge=1)
    heavy_wait_seconds: float = Field(120.0, gt=0)

    # Agent tools (grep / describe / expand / expand-query).
    grep_max_pattern_chars: int = Field(1_000, ge=1)
    # Hybrid sort: relevance x 2^(-age / half_life), so a match this old counts half.
    grep_recency_half_life_hours: float = Field(168.0, gt=0)
    expand_token_cap_max: int = Field(100_000, ge=1)
    # One expand-query: the model, its reading budget (debited on the grant as
    # tool results are read), its turns, and how long the API waits for it.
    expand_query_token_cap: int = Field(24_000, ge=1)
    expand_query_max_turns: int = Field(8, ge=1)
    expand_query_timeout_seconds: float = Field(120.0, gt=0)
    # How many of the conversations in scope one expand-query expands (the best
    # ranked); the upper bound keeps one call's loops within one deadline.
    expand_query_top_conversations: int = Field(4, ge=1, le=32)
    # Expired or revoked grants are deleted by beat after this long (kept for audit).
    expansion_grant_retention_hours: float = Field(24.0, ge=0)
    expansion_sweep_interval_seconds: float = Field(300.0, gt=0)
    # Beat's retention sweep: how often, and how many conversations per tenant per run.
    retention_sweep_interval_seconds: float = Field(3_600.0, gt=0)
    retention_batch: int = Field(100, ge=1)
    # `lcm mcp`: the lcm-server the MCP tools call, and the tenant key they use.
    mcp_api_url: str = "http://127.0.0.1:8000"
    mcp_api_key: SecretStr | None = None
    mcp_session_key: str | None = None

    # Workers and the service loop.
    worker_concurrency: int = Field(16, ge=1)
    # How many of a worker process's passes do their work outside the model
    # call at once; the others queue in arrival order (lcm/turns.py). Two,
    # not one: a pass stuck on a row lock (a conversation a long import
    # holds) leaves the other slot to the rest; the drain measured the same
    # with one and two.
    worker_pass_slots: int = Field(2, ge=1)
    # A pass (one LLM call plus short writes) must finish well inside its lease.
    lease_seconds: int = Field(300, ge=1)
    max_attempts: int = Field(5, ge=1)
    retry_base_seconds: float = Field(5.0, ge=0)
    retry_max_seconds: float = Field(300.0, ge=0)
    # A pending debt whose wake-up is older than this is woken again by beat.
    reconcile_grace_seconds: float = Field(60.0, ge=0)
    reconcile_interval_seconds: float = Field(30.0, gt=0)
    reconcile_batch: int = Field(500, ge=1)
    # Large files still without an exploration summary are re-sent this often.
    files_reconcile_interval_seconds: float = Field(300.0, gt=0)
    # SQLite: how often beat indexes search backlog a lost job or a crash left
    # behind (each ingest asks for its own indexing after commit).
    search_backlog_interval_seconds: float = Field(60.0, gt=0)
    # Budget assumed for debt recorded without one (manual compaction).
    default_token_budget: int = Field(200_000, ge=1)
    # POST …/compact with "wait": true waits this long (a number waits that many seconds).
    compact_wait_seconds: float = Field(30.0, ge=0)
    compact_wait_max_seconds: float = Field(300.0, ge=0)
    # Worker processes serve Prometheus figures here (0 disables).
    worker_metrics_port: int = Field(0, ge=0, le=65535)
    # `lcm flower`: HTTP basic auth as "user:password" (several: comma-separated).
    # Flower shows every worker and task and can revoke tasks: `lcm flower`
    # refuses to start without this unless told `--no-auth`.
    flower_basic_auth: SecretStr | None = None

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
    # The OpenAI-compatible provider (hosted OpenAI, or vLLM, Ollama, llama.cpp
    # server...): its endpoint (…/v1) and key. Either one set enables it; a
    # local server without auth needs only the URL.
    openai_api_key: SecretStr | None = None
    openai_base_url: str | None = None
    # Stream chat completions (a slow local model then never meets the read
    # timeout while it writes); usage is asked for in the stream's last chunk.
    openai_stream: bool = False

    # Secrets (lcm/secrets): detect them in stored text, record where they sit
    # (secret_spans). The key makes the spans' fingerprints (unset: keyed by the
    # tenant id, which lets a database reader confirm a guessed value). Audit
    # rows of reads of originals (secret_reads) are kept this many days.
    secrets_detection: bool = True
    secrets_fingerprint_key: SecretStr | None = None
    secrets_reads_retention_days: int = Field(365, ge=1)

    # Large files and transcripts. Large files live outside the database, in
    # this directory (default: $LCM_HOME/files; shared by the API and workers).
    files_dir: Path | None = None
    # A bootstrap that finds no anchor in a non-empty conversation imports at
    # most this many of the transcript's newest messages, and at most this
    # many tokens of them (None: no token bound).
    bootstrap_max_unanchored: int = Field(100, ge=0)
    bootstrap_max_unanchored_tokens: int | None = Field(20_000, ge=0, le=MAX_TOKENS)

    log_level: str = "INFO"
    # "json": one JSON object a line, with request/task/tenant/conversation ids (lcm/logs.py).
    log_format: Literal["text", "json"] = "text"
    # A line per job received and finished (Celery's) and per model request
    # (the SDK's HTTP client's), at INFO. Off by default: at a gateway's rate
    # they are most of a worker's log and about 0.6 ms of its CPU per pass;
    # Flower and the metrics show the same jobs. Failures are logged either way.
    log_jobs: bool = False

    @field_validator("anthropic_api_key", "openai_api_key", "openai_base_url", mode="before")
    @classmethod
    def _blank_key_is_no_key(cls, value: object) -> object:
        # Compose passes ``ANTHROPIC_API_KEY=`` when the operator set none.
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("flower_basic_auth", mode="before")
    @classmethod
    def _blank_auth_is_no_auth(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("flower_basic_auth")
    @classmethod
    def _user_colon_password(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            for pair in value.get_secret_value().split(","):
                user, _, password = pair.partition(":")
                if not user.strip() or not password:
                    raise ValueError("give user:password pairs, comma-separated")
        return value

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
    def rate_limit_store_url(self) -> str:
        """The Redis holding the rate limit buckets, or "" to keep them in this process.

        Derived when read, not at validation: embedded mode swaps the broker
        for ``memory://`` on a copy of the settings, and must not inherit a
        Redis it does not run.
        """
        if self.rate_limit_redis_url:
            return self.rate_limit_redis_url
        return self.broker_url if self.broker_url.startswith(("redis://", "rediss://")) else ""

    @property
    def openai_configured(self) -> bool:
        """True when the OpenAI-compatible provider has a key or an endpoint."""
        return self.openai_api_key is not None or self.openai_base_url is not None

    @property
    def llm_available(self) -> bool:
        return self.anthropic_api_key is not None or self.openai_configured


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read once."""
    return Settings()

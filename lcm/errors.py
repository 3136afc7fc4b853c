"""One error hierarchy for the domain; ``api/errors.py`` maps it to HTTP in one place."""

from __future__ import annotations


class LcmError(Exception):
    """Root of every error the domain raises on purpose."""

    code = "lcm_error"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


# --- the caller's fault -------------------------------------------------------


class InvalidInput(LcmError):
    """The request is malformed: unknown role, bad block, bad timestamp, bad text."""

    code = "invalid_input"


class InvalidSessionKey(InvalidInput):
    """A session key holding a control, zero-width, bidirectional or other format character."""

    code = "invalid_session_key"


class TooLarge(LcmError):
    """A body, batch or message exceeds a configured limit."""

    code = "too_large"


class Unauthenticated(LcmError):
    """No key, or a key that matches no tenant."""

    code = "unauthenticated"


class Forbidden(LcmError):
    """A known tenant asked for something it may not do."""

    code = "forbidden"


class NotFound(LcmError):
    """The thing does not exist, or belongs to another tenant (indistinguishable)."""

    code = "not_found"


class Conflict(LcmError):
    """The request contradicts current state (e.g. a name already taken)."""

    code = "conflict"


class ExpansionBusy(Conflict):
    """An expand-query from the same session is still running."""

    code = "expansion_busy"


class RateLimited(LcmError):
    """Too many requests for this tenant; ``retry_after`` seconds, when known."""

    code = "rate_limited"

    def __init__(
        self, message: str, *, code: str | None = None, retry_after: int | None = None
    ) -> None:
        super().__init__(message, code=code)
        self.retry_after = retry_after


# Quotas: a count of stored things answers 429 (like a rate, "too many"), a
# size in bytes answers 413 ("too large"); both carry ``quota_exceeded`` and no
# Retry-After, since waiting frees nothing (erasing data or a higher quota does).


class MessageQuotaExceeded(RateLimited):
    """Storing the batch would pass the tenant's ``max_stored_messages``."""

    code = "quota_exceeded"


class FileQuotaExceeded(TooLarge):
    """Storing the batch's large files would pass the tenant's ``max_file_bytes``."""

    code = "quota_exceeded"


# --- our side: dependencies and concurrency ----------------------------------


class DependencyUnavailable(LcmError):
    """The database, the broker or the LLM cannot be reached."""

    code = "dependency_unavailable"


class StaleLease(LcmError):
    """A compaction pass lost its lease or its fencing token: it must not commit."""

    code = "stale_lease"


class ContextChanged(LcmError):
    """The context range a pass read changed before it could commit."""

    code = "context_changed"


class SummarizerError(LcmError):
    """The summarizer provider failed after its retries and fallbacks."""

    code = "summarizer_error"


class ProviderUnavailable(SummarizerError):
    """The LLM provider's circuit breaker is open: the call failed fast, unsent."""

    code = "provider_unavailable"


class LlmBudgetExhausted(RateLimited):
    """The tenant's daily LLM token budget (``llm_daily_token_budget``) is spent."""

    code = "llm_budget_exhausted"


class SemanticUnavailable(InvalidInput):
    """Semantic search was asked for where it is off or its extra is not installed."""

    code = "semantic_unavailable"

"""What a call to lcm-server can raise: one root, then by where it failed.

``ApiError`` carries the server's answer: the HTTP status and the JSON error
``code`` and ``message`` of ``{"error": {"code", "message"}}``, plus the
``Retry-After`` it sent (seconds), so a caller can branch on ``exc.code``
(``invalid_text``, ``not_found``, ``database_busy`` …) rather than on text.
Each status the contract names has its own subclass. ``TransportError`` is a
call that got no answer (refused, reset, timed out).
"""

from __future__ import annotations


class LcmClientError(Exception):
    """Root of every error the client raises."""


class TransportError(LcmClientError):
    """No answer: the connection was refused or reset, or a timeout ran out.

    ``sent`` is False when the request surely never reached the server (the
    connection was never made), True when it may have.
    """

    def __init__(self, message: str, *, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


class ApiError(LcmClientError):
    """The server answered with an error status."""

    def __init__(
        self, status: int, code: str, message: str, *, retry_after: float | None = None
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after


class BadRequest(ApiError):
    """400: the request was refused as sent (``code`` says why)."""


class Unauthorized(ApiError):
    """401: missing or unknown API key."""


class Forbidden(ApiError):
    """403: the key may not do this."""


class NotFound(ApiError):
    """404: not found, or owned by another tenant (the server does not say which)."""


class Conflict(ApiError):
    """409: conflicts with the current state."""


class TooLarge(ApiError):
    """413: body, batch or message over a configured limit."""


class RateLimited(ApiError):
    """429: too many requests; ``retry_after`` says when to come back."""


class Unavailable(ApiError):
    """503: a dependency is down or busy (``database_busy`` clears within a second or so)."""


class ServerError(ApiError):
    """Any other 5xx."""


BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: TooLarge,
    429: RateLimited,
    503: Unavailable,
}


def api_error(status: int, code: str, message: str, retry_after: float | None = None) -> ApiError:
    """The subclass for ``status`` (``ServerError`` for other 5xx, ``ApiError`` otherwise)."""
    kind = BY_STATUS.get(status) or (ServerError if status >= 500 else ApiError)
    return kind(status, code, message, retry_after=retry_after)

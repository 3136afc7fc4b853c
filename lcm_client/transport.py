"""What the sync and async clients share around one HTTP exchange: timeouts, answers, errors."""

from __future__ import annotations

from dataclasses import dataclass

import httpx
from pydantic import ValidationError

from lcm_client.calls import Call, Out
from lcm_client.errors import ApiError, LcmClientError, TransportError, api_error
from lcm_client.retries import NOT_SENT, retry_after
from lcm_client.version import __version__


@dataclass(frozen=True)
class Timeouts:
    """Seconds to wait for a connection, and for each read of an answer.

    A call the server may hold on purpose (``compact`` with ``wait``,
    ``expand_query``) gets its own waiting time on top of ``read``.
    """

    connect: float = 5.0
    read: float = 30.0
    write: float = 30.0
    pool: float = 10.0

    def for_call(self, call: Call[Out]) -> httpx.Timeout:
        read = self.read + (call.slow_seconds or 0.0)
        return httpx.Timeout(connect=self.connect, read=read, write=self.write, pool=self.pool)


CONTENT_HEADERS = {"Content-Type": "application/x-ndjson"}  # a raw body (an import)


def headers(api_key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}", "User-Agent": f"lcm-client/{__version__}"}


def answer(call: Call[Out], response: httpx.Response) -> Out:
    """The call's response model, or the typed error the server answered."""
    if response.status_code not in call.answers:
        raise error_from(response)
    try:
        if call.read == "none":
            return call.out.model_validate({})
        if call.read == "text":
            return call.out.model_validate({"jsonl": response.text})
        # Parsed and validated in one pass by pydantic-core (an assembled
        # context is half a megabyte of JSON).
        return call.out.model_validate_json(response.content)
    except (ValueError, ValidationError) as exc:
        raise LcmClientError(
            f"{call.method} {call.path}: answer is not a {call.out.__name__}: {exc}"
        ) from exc


def error_from(response: httpx.Response) -> ApiError:
    """``{"error": {"code", "message"}}`` as an ``ApiError`` subclass (any body tolerated)."""
    try:
        error = response.json()["error"]
        code, message = str(error["code"]), str(error["message"])
    except (ValueError, KeyError, TypeError):
        code, message = "http_error", response.text[:500] or response.reason_phrase
    return api_error(response.status_code, code, message, retry_after(response))


def transport_error(exc: httpx.TransportError, call: Call[Out], base_url: str) -> TransportError:
    what = "timed out" if isinstance(exc, httpx.TimeoutException) else "failed"
    return TransportError(
        f"{call.method} {base_url}{call.path} {what}: {exc!r}", sent=not isinstance(exc, NOT_SENT)
    )

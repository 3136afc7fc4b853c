"""A Python client of lcm-server's v1 HTTP API: ``LcmClient`` (sync) and ``AsyncLcmClient``.

    from lcm_client.models import MessageIn, MessagesIn, AssembleIn
    from lcm_client import LcmClient

    with LcmClient("http://127.0.0.1:8000", key) as lcm:
        hello = MessageIn(role="user", content="hi", id="m1")
        lcm.ingest("agent:main", MessagesIn(messages=[hello]))
        context = lcm.assemble("agent:main", AssembleIn(token_budget=100_000)).messages

Typed by its own models (``lcm_client.models``): the request and response
bodies of the v1 API, a copy of the server's contract checked against the
server's OpenAPI document by a test. The client imports nothing of the
server: it installs on its own (``pip install ./clients/python``, needing
pydantic and httpx only). Bodies are validated on the client before they are
sent (unknown fields, unstorable text, the server's bounds).

Timeouts (``Timeouts``: connect, read, write, pool; ``compact`` with ``wait``
and ``expand_query`` get their waiting time on top of ``read``), retries
(``RetryPolicy``: 429 and 503 honouring ``Retry-After``, connection failures;
an ingest is retried only when every message carries an ``id``, see
``lcm_client.retries``) and typed errors carrying the server's error code
(``lcm_client.errors``).
"""

from lcm_client.async_client import AsyncLcmClient
from lcm_client.client import LcmClient
from lcm_client.errors import (
    ApiError,
    BadRequest,
    Conflict,
    Forbidden,
    LcmClientError,
    NotFound,
    RateLimited,
    ServerError,
    TooLarge,
    TransportError,
    Unauthorized,
    Unavailable,
)
from lcm_client.retries import NO_RETRIES, RetryPolicy
from lcm_client.transport import Timeouts

__all__ = [
    "NO_RETRIES",
    "ApiError",
    "AsyncLcmClient",
    "BadRequest",
    "Conflict",
    "Forbidden",
    "LcmClient",
    "LcmClientError",
    "NotFound",
    "RateLimited",
    "RetryPolicy",
    "ServerError",
    "Timeouts",
    "TooLarge",
    "TransportError",
    "Unauthorized",
    "Unavailable",
]

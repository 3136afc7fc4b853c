"""The one validation layer for everything a client sends: bodies, query strings, path keys.

Pydantic does the checking; the field types (``Text``, ``RowId``, ``Tokens`` …)
and ``RequestBody`` live in ``api/contract.py`` with the bodies, and this
module adds what only the server needs. The project's rules, once:

- every body model refuses unknown fields (a typo such as ``tokenBudget`` is a
  400 naming the field, not a silently ignored value);
- every string field of a body, path or query must be storable
  (``lcm/storable.py``: no NUL, no lone surrogate); free-form JSON (message
  blocks, settings) is checked by the domain with the same rule, bounded in
  depth too;
- integers are bounded to what a 64-bit column holds (ids) or to
  ``MAX_TOKENS`` (token figures), datetimes must exist in UTC;
- a path or query string that is not valid UTF-8 once percent-decoded is
  refused before routing (Starlette would decode it with replacement
  characters, folding ``%FF`` and ``%FE`` into one session key).

Failures become ``RequestValidationError`` and are answered by ``api/errors.py``
with 400 and ``invalid_text`` (see ``ERROR_CODES``) or ``invalid_input``; the
domain's own refusals carry ``invalid_text`` and ``too_deep``.
"""

from __future__ import annotations

import json
from typing import Annotated
from urllib.parse import unquote_to_bytes

from fastapi import Path, Request
from pydantic import AfterValidator
from starlette.types import ASGIApp, Receive, Scope, Send

from api.console.headers import is_console_path
from api.console.rendering import error_page
from api.contract import Text
from lcm.conversations.session_keys import normalized_session_key

# Validation error types answered with their own error code (pydantic refuses
# a lone surrogate in any ``str`` itself, as ``string_unicode``).
ERROR_CODES = {
    "invalid_text": "invalid_text",
    "string_unicode": "invalid_text",
}
# ``{key}`` of /v1/conversations/{key}/…: the URL-decoded session key (slashes allowed),
# in NFC; one holding a control, zero-width, bidi or format character is refused
# with ``invalid_session_key`` (lcm/conversations/session_keys.py).
SessionKey = Annotated[
    Text, Path(min_length=1, max_length=512), AfterValidator(normalized_session_key)
]


class Utf8Only:
    """ASGI middleware: 400 ``invalid_path`` unless path and query decode as strict UTF-8."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            raw_path = scope.get("raw_path") or scope["path"].encode()
            problem = not_utf8(raw_path, "path") or not_utf8(
                scope.get("query_string", b"").replace(b"+", b" "), "query string"
            )
            if problem and is_console_path(scope["path"]):  # the console answers in HTML
                page = error_page(Request(scope), 400, "invalid_path", problem)
                await page(scope, receive, send)
                return
            if problem:
                await _refuse(send, problem)
                return
        await self.app(scope, receive, send)


def not_utf8(raw: bytes, what: str) -> str | None:
    try:
        unquote_to_bytes(raw).decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"the {what} is not valid UTF-8 once percent-decoded (byte {exc.start})"
    return None


async def _refuse(send: Send, message: str) -> None:
    payload = json.dumps({"error": {"code": "invalid_path", "message": message}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(payload))]
    await send({"type": "http.response.start", "status": 400, "headers": headers})
    await send({"type": "http.response.body", "body": payload})

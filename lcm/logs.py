"""The process's log lines: text or JSON, each carrying who and what it is about.

``LCM_LOG_FORMAT=json`` writes one JSON object per line (``time``, ``level``,
``logger``, ``message`` and the fields below); ``text`` (the default) keeps
the human-readable line, with the same fields appended as ``key=value``.

Fields come from :func:`log_fields`: the API binds ``request_id`` and, once
the key is known, ``tenant_id``; a worker binds ``task_id`` and the job's
``tenant_id`` / ``conversation_id``; code adds ``conversation_id`` where it
knows it. A request's fields are one mutable dict shared by every thread the
request runs in: a context variable is copied into each thread hop, so a
value set in one (the tenant, found by the key check) would not reach the
next; the dict they all point at does.

What is never logged: message text, summaries, keys. Log calls pass ids and
counts; ``extra`` fields are filtered to :data:`FIELDS` in JSON, so a stray
attribute cannot carry content out.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from typing import Any

from pythonjsonlogger.json import JsonFormatter

# Every structured field a line may carry (besides time, level, logger, message).
FIELDS = (
    "request_id",
    "task_id",
    "tenant_id",
    "conversation_id",
    "event",
    "method",
    "path",
    "status",
    "duration_ms",
    "reason",
    "kind",
    "depth",
    "first_ordinal",
    "last_ordinal",
    "tokens_before",
    "tokens_after",
    "context_tokens_before",
    "token_budget",
    "model",
    "escalation",
    "degraded",
    "summary_id",
)

_HANDLER = "lcm"
_fields: ContextVar[dict[str, Any] | None] = ContextVar("lcm_log_fields", default=None)


@contextmanager
def log_fields(**fields: Any) -> Iterator[dict[str, Any]]:
    """Bind ``fields`` to every line logged inside; the dict may be added to later."""
    bound = {**(_fields.get() or {}), **fields}
    token = _fields.set(bound)
    try:
        yield bound
    finally:
        _fields.reset(token)


def add_log_fields(**fields: Any) -> None:
    """Add to the innermost :func:`log_fields` (seen by every thread of that request)."""
    bound = _fields.get()
    if bound is not None:
        bound.update(fields)


class _ContextFields(logging.Filter):
    """Copies the bound fields onto each record (a field set on the call wins)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, value in (_fields.get() or {}).items():
            if not hasattr(record, name):
                setattr(record, name, value)
        return True


class _Json(JsonFormatter):
    def add_fields(
        self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]
    ) -> None:
        log_data["time"] = self.formatTime(record)
        log_data["level"] = record.levelname
        log_data["logger"] = record.name
        log_data["message"] = record.getMessage()
        for name in FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                log_data[name] = value
        if record.exc_info:
            log_data["exception"] = self.formatException(record.exc_info)


class _Text(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extra = " ".join(
            f"{name}={getattr(record, name)}"
            for name in FIELDS
            if getattr(record, name, None) is not None
        )
        return f"{line} [{extra}]" if extra else line


def configure_logging(level: str, log_format: str) -> None:
    """Route every logger (ours, uvicorn's, Celery's) to stderr in ``log_format``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(_ContextFields())
    if log_format == "json":
        handler.setFormatter(_Json())
    else:
        handler.setFormatter(_Text("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.set_name(_HANDLER)
    root = logging.getLogger()
    for installed in [h for h in root.handlers if h.get_name() == _HANDLER]:
        root.removeHandler(installed)  # configured again (tests build several apps)
    root.addHandler(handler)
    root.setLevel(level)
    # uvicorn's and Celery's own loggers go through the root's handler.
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "celery"):
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True


def access_logged(level: str) -> bool:
    """Whether uvicorn's access lines (INFO, one per request) show at ``level``.

    Given to uvicorn as ``access_log``: when they do not show, uvicorn skips
    them altogether, where otherwise it built each line's arguments (the
    client's address, the path with its query) per response only for the
    logger to drop the line.
    """
    number = logging.getLevelName(level.upper())
    return not isinstance(number, int) or number <= logging.INFO


def bind_log_fields(**fields: Any) -> Token[dict[str, Any] | None]:
    """Bind ``fields`` until :func:`unbind_log_fields` (for begin/end hooks, e.g. a task's)."""
    return _fields.set({**(_fields.get() or {}), **fields})


def unbind_log_fields(token: Token[dict[str, Any] | None]) -> None:
    _fields.reset(token)

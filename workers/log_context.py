"""A worker's log lines: Celery's logging replaced by ours, each task's lines tagged.

``setup_logging`` handled: Celery then leaves the root logger alone and the
worker writes lines in ``LCM_LOG_FORMAT`` like the API. Around each task the
``task_id`` and the job's ``tenant_id`` / ``conversation_id`` (when its
arguments name them) are bound; the task runs in the thread that ran
``task_prerun``, so the binding is that thread's alone.
"""

from __future__ import annotations

from contextvars import Token
from typing import Any

from celery.signals import setup_logging, task_postrun, task_prerun

from lcm.logs import bind_log_fields, configure_logging, unbind_log_fields
from lcm.settings import Settings

_bound: dict[str, Token[dict[str, Any] | None]] = {}
_settings: list[Settings] = []


def install(settings: Settings) -> None:
    """Connect the handlers (once per process; a later call updates the settings)."""
    _settings[:] = [settings]
    setup_logging.connect(_setup_logging, weak=False, dispatch_uid="lcm-logging")
    task_prerun.connect(_bind, weak=False, dispatch_uid="lcm-log-bind")
    task_postrun.connect(_unbind, weak=False, dispatch_uid="lcm-log-unbind")


def _setup_logging(**_: Any) -> None:
    if _settings:
        configure_logging(_settings[0].log_level, _settings[0].log_format)


def _bind(task_id: str | None = None, kwargs: dict[str, Any] | None = None, **_: Any) -> None:
    if task_id is None:
        return
    given = kwargs or {}
    fields = {name: given[name] for name in ("tenant_id", "conversation_id") if name in given}
    _bound[task_id] = bind_log_fields(task_id=task_id, **fields)


def _unbind(task_id: str | None = None, **_: Any) -> None:
    token = _bound.pop(task_id, None) if task_id is not None else None
    if token is not None:
        unbind_log_fields(token)

"""What the server adds to the wire contract (``api/contract/``): requests as domain input.

The bodies themselves live in ``api/contract/`` (light: pydantic and two
small domain modules); this module turns them into what the domain takes and
builds the settings patch body from ``CompactionSettings``, which needs the
settings module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, create_model

from api.contract import BatchIn, ExpandQueryIn, GrepIn, RequestBody, ScopeIn
from lcm.content import PreparedMessage
from lcm.ingest.service import prepare_batch
from lcm.retrieval.answers import ExpandQueryRequest
from lcm.retrieval.grep import GrepQuery
from lcm.retrieval.scope import ScopeSelector
from lcm.settings import Settings, TenantSettings


def prepared_batch(body: BatchIn, settings: Settings) -> list[PreparedMessage]:
    """The validated batch (before any query: on SQLite a write query takes the lock)."""
    return prepare_batch(
        [m.to_domain() for m in body.messages],
        max_batch=settings.max_batch_messages,
        max_chars=settings.max_message_chars,
    )


def scope_selector(body: ScopeIn) -> ScopeSelector:
    return ScopeSelector(body.session_key, body.conversation_id, body.all_conversations)


def grep_query(body: GrepIn) -> GrepQuery:
    file_ids = tuple(dict.fromkeys(body.file_ids or ()))
    sort = body.sort
    if body.mode in ("semantic", "hybrid") and "sort" not in body.model_fields_set:
        sort = "relevance"  # ranking by meaning is the point of these modes
    return GrepQuery(body.pattern, body.mode, body.scope, sort, body.limit, file_ids)


def expand_query_request(body: ExpandQueryIn) -> ExpandQueryRequest:
    return ExpandQueryRequest(
        body.prompt, body.query, tuple(body.summary_ids), body.max_tokens, body.timeout_ms
    )


def _patch_model() -> type[BaseModel]:
    """Every overridable setting, optional and nullable (``null`` removes the override).

    Built from ``TenantSettings`` so the documented body cannot drift from
    what the domain validates (``validate_overrides`` checks it again).
    """
    fields: dict[str, Any] = {}
    for name, info in TenantSettings.model_fields.items():
        annotation: Any = info.annotation
        if info.metadata:
            annotation = Annotated[annotation, *info.metadata]  # the same bounds
        fields[name] = (annotation | None, None)
    return create_model("TenantSettingsPatch", __base__=RequestBody, **fields)


if TYPE_CHECKING:  # a model built at import time; to the type checker, any request body
    TenantSettingsPatch = RequestBody
else:
    TenantSettingsPatch = _patch_model()

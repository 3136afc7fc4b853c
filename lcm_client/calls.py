"""Every endpoint as one ``Call``: method, path, body, response model, whether it is replayable.

The sync and the async client send the same calls; this module is where an
endpoint is described once. Bodies are the client's request models
(``lcm_client/models``, the server's contract as the client sees it), dumped
with ``exclude_unset`` so defaults stay the server's; responses are parsed
into its response models.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote

from pydantic import BaseModel

from lcm_client.models import (
    AssembleIn,
    AssembleOut,
    BatchIn,
    BootstrapIn,
    BootstrapOut,
    CommitIn,
    CommitOut,
    CompactIn,
    CompactOut,
    ConversationListOut,
    ConversationStatus,
    DoctorApplyIn,
    DoctorApplyOut,
    DoctorOut,
    ExpandIn,
    ExpandQueryAnswer,
    ExpandQueryIn,
    Expansion,
    ExportOut,
    FileDescription,
    ForkEndIn,
    ForkEndOut,
    ForkIn,
    ForkOut,
    GrepIn,
    GrepResult,
    Health,
    HostCursorOut,
    ImportOut,
    IssuedKeyOut,
    KeyIn,
    KeyList,
    KeyOut,
    MessagesIn,
    MessagesOut,
    NoContent,
    Readiness,
    SecretErasedOut,
    SecretEraseIn,
    SecretReadsOut,
    SecretScanIn,
    SecretScanOut,
    SecretsReportOut,
    SessionResetIn,
    SessionResetOut,
    SummaryDescription,
    SummaryDissolveIn,
    SummaryOperationOut,
    SummaryRewriteIn,
    TenantSettingsOut,
    TurnIn,
    TurnOut,
    UsageOut,
)

Out = TypeVar("Out", bound=BaseModel)


@dataclass(frozen=True)
class Call(Generic[Out]):
    """One request and how to read its answer."""

    method: str
    path: str
    out: type[Out]
    json: dict[str, Any] | None = None
    params: dict[str, Any] = field(default_factory=dict)
    # May be sent twice with the effect of once (lcm_client.retries says which are).
    replayable: bool = True
    # Statuses whose body is an ``out`` (``/readyz`` answers 503 with a Readiness).
    answers: frozenset[int] = frozenset({200})
    # Seconds the server may take to answer, when longer than the client's read timeout.
    slow_seconds: float | None = None
    # A raw body (JSONL) instead of ``json``, sent as application/x-ndjson.
    content: bytes | None = None
    # How the answer is read: a JSON ``out``, the body text into ``out(jsonl=…)``, or nothing.
    read: Literal["json", "text", "none"] = "json"


def conversation_path(key: str, tail: str) -> str:
    # The session key may hold anything (slashes, spaces, '?'): encoded whole.
    return f"/v1/conversations/{quote(key, safe='')}/{tail}"


def _body(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json", exclude_unset=True)


def _all_ids(body: BatchIn) -> bool:
    """A batch whose every message has a client id: a second arrival stores nothing again."""
    return all(message.id is not None for message in body.messages)


def ingest(key: str, body: MessagesIn) -> Call[MessagesOut]:
    return Call(
        "POST",
        conversation_path(key, "messages"),
        MessagesOut,
        _body(body),
        replayable=_all_ids(body),
    )


def turn(key: str, body: TurnIn) -> Call[TurnOut]:
    return Call(
        "POST", conversation_path(key, "turns"), TurnOut, _body(body), replayable=_all_ids(body)
    )


def commit(key: str, body: CommitIn) -> Call[CommitOut]:
    # The advancement key makes any commit replayable, ids or not.
    return Call("POST", conversation_path(key, "commits"), CommitOut, _body(body))


def bootstrap(key: str, body: BootstrapIn) -> Call[BootstrapOut]:
    return Call("POST", conversation_path(key, "bootstrap"), BootstrapOut, _body(body))


def assemble(key: str, body: AssembleIn) -> Call[AssembleOut]:
    return Call("POST", conversation_path(key, "assemble"), AssembleOut, _body(body))


def compact(key: str, body: CompactIn, default_wait_seconds: float) -> Call[CompactOut]:
    wait = body.wait
    waits = default_wait_seconds if wait is True else float(wait or 0)
    return Call(
        "POST",
        conversation_path(key, "compact"),
        CompactOut,
        _body(body),
        slow_seconds=waits or None,
    )


def status(key: str, token_budget: int | None, session_id: str | None) -> Call[ConversationStatus]:
    params = {"token_budget": token_budget, "session_id": session_id}
    return Call(
        "GET",
        conversation_path(key, "status"),
        ConversationStatus,
        params={k: v for k, v in params.items() if v is not None},
    )


def host_cursor(key: str, session_id: str | None) -> Call[HostCursorOut]:
    params = {"session_id": session_id} if session_id is not None else {}
    return Call("GET", conversation_path(key, "host-cursor"), HostCursorOut, params=params)


def fork(key: str, body: ForkIn) -> Call[ForkOut]:
    return Call("POST", conversation_path(key, "fork"), ForkOut, _body(body))


def end_fork(key: str, body: ForkEndIn) -> Call[ForkEndOut]:
    return Call("POST", conversation_path(key, "fork/end"), ForkEndOut, _body(body))


def session_reset(key: str, body: SessionResetIn) -> Call[SessionResetOut]:
    return Call("POST", conversation_path(key, "session"), SessionResetOut, _body(body))


def rollback_fork(key: str) -> Call[ForkEndOut]:
    return Call("POST", conversation_path(key, "fork/rollback"), ForkEndOut)


def grep(body: GrepIn) -> Call[GrepResult]:
    return Call("POST", "/v1/grep", GrepResult, _body(body))


def describe_summary(summary_id: str) -> Call[SummaryDescription]:
    return Call("GET", f"/v1/summaries/{quote(summary_id, safe='')}", SummaryDescription)


def describe_file(file_id: str, offset: int, limit: int | None) -> Call[FileDescription]:
    params: dict[str, Any] = {"offset": offset} | ({"limit": limit} if limit else {})
    return Call("GET", f"/v1/files/{quote(file_id, safe='')}", FileDescription, params=params)


def expand(body: ExpandIn) -> Call[Expansion]:
    return Call("POST", "/v1/expand", Expansion, _body(body))


# The server answers a little after a call's deadline (its worker stores what it has).
EXPAND_QUERY_GRACE_SECONDS = 10.0


def expand_query(body: ExpandQueryIn, wait_seconds: float) -> Call[ExpandQueryAnswer]:
    # Harmless to repeat (a grant revoked when done), but not resent: its 503 is
    # mostly the server's deadline for the worker passing, and a second try
    # would hold the caller for another whole deadline. A call's own
    # timeout_ms (the server answers by then) replaces the default wait.
    if body.timeout_ms is not None:
        wait_seconds = body.timeout_ms / 1000 + EXPAND_QUERY_GRACE_SECONDS
    return Call(
        "POST",
        "/v1/expand-query",
        ExpandQueryAnswer,
        _body(body),
        replayable=False,
        slow_seconds=wait_seconds,
    )


def settings() -> Call[TenantSettingsOut]:
    return Call("GET", "/v1/tenant/settings", TenantSettingsOut)


def update_settings(changes: Mapping[str, Any]) -> Call[TenantSettingsOut]:
    # A PATCH of overrides: sending the same ones twice leaves the same settings.
    return Call("PATCH", "/v1/tenant/settings", TenantSettingsOut, dict(changes))


def doctor(conversation_id: int | None = None) -> Call[DoctorOut]:
    params = {} if conversation_id is None else {"conversation_id": conversation_id}
    return Call("GET", "/v1/tenant/doctor", DoctorOut, params=params)


def doctor_apply(body: DoctorApplyIn) -> Call[DoctorApplyOut]:
    # Owing a repair twice coalesces on the conversation's one debt row.
    return Call("POST", "/v1/tenant/doctor/apply", DoctorApplyOut, _body(body))


def _surgery(
    summary_id: str, action: str, body: BaseModel, wait: bool | float, default: float
) -> Call[SummaryOperationOut]:
    waits = default if wait is True else float(wait or 0)
    return Call(
        "POST",
        f"/v1/tenant/summaries/{quote(summary_id, safe='')}/{action}",
        SummaryOperationOut,
        _body(body),
        # Each request stores an operation of its own: sent twice, it runs twice.
        replayable=False,
        slow_seconds=waits or None,
    )


def rewrite_summary(
    summary_id: str, body: SummaryRewriteIn, default_wait_seconds: float
) -> Call[SummaryOperationOut]:
    return _surgery(summary_id, "rewrite", body, body.wait, default_wait_seconds)


def dissolve_summary(
    summary_id: str, body: SummaryDissolveIn, default_wait_seconds: float
) -> Call[SummaryOperationOut]:
    return _surgery(summary_id, "dissolve", body, body.wait, default_wait_seconds)


def summary_operation(operation_id: str) -> Call[SummaryOperationOut]:
    path = f"/v1/tenant/operations/{quote(operation_id, safe='')}"
    return Call("GET", path, SummaryOperationOut)


def health() -> Call[Health]:
    return Call("GET", "/healthz", Health)


def ready() -> Call[Readiness]:
    return Call("GET", "/readyz", Readiness, answers=frozenset({200, 503}))


# --- data (list, erase, export, import) ---


def list_conversations(
    limit: int,
    cursor: str | None,
    prefix: str | None,
    archived: bool | None,
    updated_since: datetime | None,
) -> Call[ConversationListOut]:
    params = {
        "limit": limit,
        "cursor": cursor,
        "prefix": prefix,
        "archived": None if archived is None else str(archived).lower(),
        "updated_since": None if updated_since is None else updated_since.isoformat(),
    }
    return Call(
        "GET",
        "/v1/conversations",
        ConversationListOut,
        params={k: v for k, v in params.items() if v is not None},
    )


def _one_of(session_id: str | None, conversation_id: int | None) -> dict[str, Any]:
    params = {"session_id": session_id, "conversation_id": conversation_id}
    return {k: v for k, v in params.items() if v is not None}


def erase(key: str, session_id: str | None, conversation_id: int | None) -> Call[NoContent]:
    # Erasing twice leaves the same nothing (the second answers 404).
    path = f"/v1/conversations/{quote(key, safe='')}"
    params = _one_of(session_id, conversation_id)
    return Call("DELETE", path, NoContent, params=params, answers=frozenset({204}), read="none")


def export(
    key: str, session_id: str | None, conversation_id: int | None, with_secrets: bool = False
) -> Call[ExportOut]:
    params = _one_of(session_id, conversation_id)
    if with_secrets:
        params = {**params, "with_secrets": "true"}
    return Call("GET", conversation_path(key, "export"), ExportOut, params=params, read="text")


def import_conversation(key: str, jsonl: str, session_id: str | None) -> Call[ImportOut]:
    # Not resent: an import that reached the server made the conversation non-empty,
    # and a second one would be refused (409) rather than repeat it.
    params = {} if session_id is None else {"session_id": session_id}
    return Call(
        "POST",
        conversation_path(key, "import"),
        ImportOut,
        params=params,
        content=jsonl.encode("utf-8"),
        replayable=False,
    )


# --- tenant administration ---


def usage(since: date | datetime | None) -> Call[UsageOut]:
    params = {} if since is None else {"since": since.isoformat()}
    return Call("GET", "/v1/tenant/usage", UsageOut, params=params)


def start_secret_scan(body: SecretScanIn) -> Call[SecretScanOut]:
    # Not replayed: a second start of the same scope is a 409 while the first runs.
    return Call(
        "POST",
        "/v1/tenant/secrets/scans",
        SecretScanOut,
        _body(body),
        answers=frozenset({202}),
        replayable=False,
    )


def secret_scan(scan_id: int) -> Call[SecretScanOut]:
    return Call("GET", f"/v1/tenant/secrets/scans/{scan_id}", SecretScanOut)


def secrets_report(conversation_id: int | None) -> Call[SecretsReportOut]:
    params = {} if conversation_id is None else {"conversation_id": str(conversation_id)}
    return Call("GET", "/v1/tenant/secrets/report", SecretsReportOut, params=params)


def secret_reads(
    conversation_id: int | None, key_id: int | None, cursor: str | None, limit: int
) -> Call[SecretReadsOut]:
    params: dict[str, str] = {"limit": str(limit)}
    for name, value in (
        ("conversation_id", conversation_id),
        ("key_id", key_id),
        ("cursor", cursor),
    ):
        if value is not None:
            params[name] = str(value)
    return Call("GET", "/v1/tenant/secrets/reads", SecretReadsOut, params=params)


def erase_secrets(body: SecretEraseIn) -> Call[SecretErasedOut]:
    # Replayable: a second erasure of the same values changes nothing.
    return Call("POST", "/v1/tenant/secrets/erase", SecretErasedOut, _body(body))


def erase_tenant(confirm: str) -> Call[NoContent]:
    return Call(
        "DELETE",
        "/v1/tenant",
        NoContent,
        params={"confirm": confirm},
        answers=frozenset({204}),
        read="none",
    )


def keys() -> Call[KeyList]:
    return Call("GET", "/v1/tenant/keys", KeyList)


def create_key(body: KeyIn) -> Call[IssuedKeyOut]:
    # Not resent: a second arrival would issue a second key.
    return Call(
        "POST",
        "/v1/tenant/keys",
        IssuedKeyOut,
        _body(body),
        replayable=False,
        answers=frozenset({201}),
    )


def revoke_key(key_id: int) -> Call[KeyOut]:
    return Call("POST", f"/v1/tenant/keys/{key_id}/revoke", KeyOut)


def rotate_key(key_id: int) -> Call[IssuedKeyOut]:
    # Not resent: the second rotation of an already rotated key is refused (409).
    return Call(
        "POST",
        f"/v1/tenant/keys/{key_id}/rotate",
        IssuedKeyOut,
        replayable=False,
        answers=frozenset({201}),
    )

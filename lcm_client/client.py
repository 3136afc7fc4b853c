"""``LcmClient``: lcm-server's v1 API, synchronous (``AsyncLcmClient`` is the same, awaited)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import date, datetime
from types import TracebackType
from typing import Any

import httpx

from lcm_client import calls
from lcm_client.calls import Call, Out
from lcm_client.models import (
    AssembleIn,
    AssembleOut,
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
from lcm_client.retries import RetryPolicy
from lcm_client.transport import (
    CONTENT_HEADERS,
    Timeouts,
    answer,
    error_from,
    headers,
    transport_error,
)

# The server's LCM_COMPACT_WAIT_SECONDS / LCM_EXPAND_QUERY_TIMEOUT_SECONDS defaults:
# how long it may hold ``compact(wait=True)`` and ``expand_query`` before answering.
COMPACT_WAIT_SECONDS = 30.0
EXPAND_QUERY_SECONDS = 120.0


class LcmClient:
    """One tenant's view of an lcm-server: every ``/v1`` endpoint, typed by ``lcm_client.models``.

    Thread-safe (one ``httpx.Client`` and its connection pool); close it, or
    use it as a context manager. Errors are ``lcm_client.errors``; retries
    follow ``lcm_client.retries`` (which calls, after what, how long).
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeouts: Timeouts | None = None,
        retry: RetryPolicy | None = None,
        compact_wait_seconds: float = COMPACT_WAIT_SECONDS,
        expand_query_seconds: float = EXPAND_QUERY_SECONDS,
        transport: httpx.BaseTransport | None = None,
        limits: httpx.Limits | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeouts = timeouts or Timeouts()
        self.retry = retry or RetryPolicy()
        self.compact_wait_seconds = compact_wait_seconds
        self.expand_query_seconds = expand_query_seconds
        self._http = httpx.Client(
            base_url=self.base_url,
            headers=headers(api_key),
            transport=transport,
            limits=limits or httpx.Limits(),
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> LcmClient:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def send(self, call: Call[Out]) -> Out:
        """Send ``call``, retrying as its policy allows; its answer or a typed error."""
        attempt = 0
        while True:
            try:
                response = self._http.request(
                    call.method,
                    call.path,
                    json=call.json,
                    content=call.content,
                    headers=CONTENT_HEADERS if call.content is not None else None,
                    params=call.params,
                    timeout=self.timeouts.for_call(call),
                )
            except httpx.TransportError as exc:
                delay = self.retry.after_transport_error(exc, attempt, call.replayable)
                if delay is None:
                    raise transport_error(exc, call, self.base_url) from exc
            else:
                if response.status_code in call.answers:
                    return answer(call, response)
                delay = self.retry.after_response(response, attempt, call.replayable)
                if delay is None:
                    raise error_from(response)
            time.sleep(delay)  # Retry-After or backoff, with jitter (see lcm_client.retries)
            attempt += 1

    # --- conversations ---

    def ingest(self, key: str, body: MessagesIn) -> MessagesOut:
        """Store messages (retried only when every message has an ``id``)."""
        return self.send(calls.ingest(key, body))

    def turn(self, key: str, body: TurnIn) -> TurnOut:
        """After-turn: store the turn's messages, record compaction debt over the threshold."""
        return self.send(calls.turn(key, body))

    def commit(self, key: str, body: CommitIn) -> CommitOut:
        """Store one accepted turn exactly once per ``advancement_key``."""
        return self.send(calls.commit(key, body))

    def bootstrap(self, key: str, body: BootstrapIn) -> BootstrapOut:
        return self.send(calls.bootstrap(key, body))

    def assemble(self, key: str, body: AssembleIn) -> AssembleOut:
        return self.send(calls.assemble(key, body))

    def compact(self, key: str, body: CompactIn | None = None) -> CompactOut:
        return self.send(calls.compact(key, body or CompactIn(), self.compact_wait_seconds))

    def status(
        self, key: str, *, token_budget: int | None = None, session_id: str | None = None
    ) -> ConversationStatus:
        return self.send(calls.status(key, token_budget, session_id))

    def host_cursor(self, key: str, *, session_id: str | None = None) -> HostCursorOut:
        """The host transcript cursor the last batch brought (``MessagesIn.host_cursor``)."""
        return self.send(calls.host_cursor(key, session_id))

    def fork(self, key: str, body: ForkIn) -> ForkOut:
        return self.send(calls.fork(key, body))

    def end_fork(self, key: str, body: ForkEndIn | None = None) -> ForkEndOut:
        return self.send(calls.end_fork(key, body or ForkEndIn()))

    def session_reset(self, key: str, body: SessionResetIn) -> SessionResetOut:
        """The host's ``/new`` (``mode="new"``) or ``/reset`` (``mode="reset"``)."""
        return self.send(calls.session_reset(key, body))

    def rollback_fork(self, key: str) -> ForkEndOut:
        return self.send(calls.rollback_fork(key))

    # --- agent tools ---

    def grep(self, body: GrepIn) -> GrepResult:
        return self.send(calls.grep(body))

    def describe_summary(self, summary_id: str) -> SummaryDescription:
        return self.send(calls.describe_summary(summary_id))

    def describe_file(
        self, file_id: str, *, offset: int = 0, limit: int | None = None
    ) -> FileDescription:
        return self.send(calls.describe_file(file_id, offset, limit))

    def describe(self, node_id: str) -> SummaryDescription | FileDescription:
        """A ``file_…`` id's description, else a summary's."""
        if node_id.startswith("file_"):
            return self.describe_file(node_id)
        return self.describe_summary(node_id)

    def expand(self, body: ExpandIn) -> Expansion:
        return self.send(calls.expand(body))

    def expand_query(self, body: ExpandQueryIn) -> ExpandQueryAnswer:
        return self.send(calls.expand_query(body, self.expand_query_seconds))

    # --- data: list, erase, export, import ---

    def list_conversations(
        self,
        *,
        limit: int = 50,
        cursor: str | None = None,
        prefix: str | None = None,
        archived: bool | None = None,
        updated_since: datetime | None = None,
    ) -> ConversationListOut:
        """A page of the tenant's conversations (``next_cursor`` for the next one)."""
        call = calls.list_conversations(limit, cursor, prefix, archived, updated_since)
        return self.send(call)

    def erase(
        self, key: str, *, session_id: str | None = None, conversation_id: int | None = None
    ) -> None:
        """Erase the session family ``key``, or one conversation of it (admin scope)."""
        self.send(calls.erase(key, session_id, conversation_id))

    def export(
        self,
        key: str,
        *,
        session_id: str | None = None,
        conversation_id: int | None = None,
        with_secrets: bool = False,
    ) -> str:
        """The conversation (default: the family's latest) as JSONL text.

        Detected secrets come as placeholders unless ``with_secrets`` (admin scope).
        """
        return self.send(calls.export(key, session_id, conversation_id, with_secrets)).jsonl

    def import_conversation(
        self, key: str, jsonl: str, *, session_id: str | None = None
    ) -> ImportOut:
        """Write an export into a new or empty conversation of ``key``."""
        return self.send(calls.import_conversation(key, jsonl, session_id))

    # --- tenant administration (admin scope) ---

    def usage(self, since: date | datetime | None = None) -> UsageOut:
        return self.send(calls.usage(since))

    def start_secret_scan(self, body: SecretScanIn | None = None) -> SecretScanOut:
        """Re-scan stored history for secrets (admin key); 409 while one of the scope runs."""
        return self.send(calls.start_secret_scan(body or SecretScanIn()))

    def secret_scan(self, scan_id: int) -> SecretScanOut:
        return self.send(calls.secret_scan(scan_id))

    def secrets_report(self, conversation_id: int | None = None) -> SecretsReportOut:
        """Stored findings by kind per conversation (admin key)."""
        return self.send(calls.secrets_report(conversation_id))

    def secret_reads(
        self,
        *,
        conversation_id: int | None = None,
        key_id: int | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> SecretReadsOut:
        """Reads that returned originals, newest first (admin key; ``next_cursor`` continues)."""
        return self.send(calls.secret_reads(conversation_id, key_id, cursor, limit))

    def erase_secrets(self, body: SecretEraseIn) -> SecretErasedOut:
        """Replace secrets' originals with their placeholders for good (admin key)."""
        return self.send(calls.erase_secrets(body))

    def erase_tenant(self, confirm: str) -> None:
        """Erase the calling tenant; ``confirm`` repeats its name."""
        self.send(calls.erase_tenant(confirm))

    def keys(self) -> KeyList:
        return self.send(calls.keys())

    def create_key(self, body: KeyIn) -> IssuedKeyOut:
        return self.send(calls.create_key(body))

    def revoke_key(self, key_id: int) -> KeyOut:
        return self.send(calls.revoke_key(key_id))

    def rotate_key(self, key_id: int) -> IssuedKeyOut:
        return self.send(calls.rotate_key(key_id))

    # --- tenant and health ---

    def settings(self) -> TenantSettingsOut:
        return self.send(calls.settings())

    def update_settings(self, changes: Mapping[str, Any]) -> TenantSettingsOut:
        """PATCH overrides (``None`` removes one); the server validates them."""
        return self.send(calls.update_settings(changes))

    def doctor(self, conversation_id: int | None = None) -> DoctorOut:
        """The tenant's broken, truncated and degraded summaries (admin key)."""
        return self.send(calls.doctor(conversation_id))

    def doctor_apply(self, body: DoctorApplyIn | None = None) -> DoctorApplyOut:
        """Re-summarize degraded summaries with the LLM (a leased job per conversation)."""
        return self.send(calls.doctor_apply(body or DoctorApplyIn()))

    def rewrite_summary(
        self, summary_id: str, body: SummaryRewriteIn | None = None
    ) -> SummaryOperationOut:
        """Rewrite a summary with the LLM in place, as a leased job (admin key)."""
        call = calls.rewrite_summary(
            summary_id, body or SummaryRewriteIn(), self.compact_wait_seconds
        )
        return self.send(call)

    def dissolve_summary(
        self, summary_id: str, body: SummaryDissolveIn | None = None
    ) -> SummaryOperationOut:
        """Put a condensed summary's sources back in the context, as a leased job (admin key)."""
        call = calls.dissolve_summary(
            summary_id, body or SummaryDissolveIn(), self.compact_wait_seconds
        )
        return self.send(call)

    def summary_operation(self, operation_id: str) -> SummaryOperationOut:
        """A surgery operation as it is now (admin key)."""
        return self.send(calls.summary_operation(operation_id))

    def health(self) -> Health:
        return self.send(calls.health())

    def ready(self) -> Readiness:
        """Readiness, ready or not (a 503 here is an answer, not an error)."""
        return self.send(calls.ready())

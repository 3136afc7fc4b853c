"""An expand-query's life: a grant is issued (API), the loop runs under it (worker), revoked.

Issuing happens in the API's transaction, which commits before the job is
enqueued: the worker must find the grant. The request (the user's prompt and
query) is stored on the grant and the job carries the grant id only, so the
broker, Flower and worker logs never hold a tenant's text; the answer comes
back the same way and the API clears both once it read the answer. Running
happens in the worker; its tool calls are their own short transactions, and
the grant is revoked (with the LLM usage recorded) in a last one, whatever
the outcome.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from lcm.db.engine import Transaction
from lcm.db.models import LlmUsage, utcnow
from lcm.errors import (
    DependencyUnavailable,
    InvalidInput,
    LlmBudgetExhausted,
    NotFound,
    SummarizerError,
)
from lcm.retrieval.agent_tools import GrantedTools, GrantEnded, to_jsonable
from lcm.retrieval.answers import ExpandQueryAnswer, ExpandQueryRequest
from lcm.retrieval.expand_query import ExpansionLlm, LoopLlm, run_expand_query
from lcm.retrieval.expand_query_chat import ChatExpansionLlm
from lcm.retrieval.grants import Grant, issue_grant, revoke_grant
from lcm.retrieval.grants_repository import GrantRepository
from lcm.retrieval.grep import GrepLimits
from lcm.retrieval.repository import HistoryRepository
from lcm.retrieval.scope import ScopeSelector, conversation_ids
from lcm.settings import Settings
from lcm.summarize import LlmClients, LlmConnections, model_route
from lcm.tenants.service import effective_settings
from lcm.tenants.spend import require_llm_budget
from lcm.worker_link import WorkerLink

# The grant outlives the API's wait a little: a job that starts just before the
# deadline may finish its current call; it never outlives this margin.
GRANT_MARGIN_SECONDS = 30.0


def grep_limits(settings: Settings) -> GrepLimits:
    return GrepLimits(
        timeout_ms=settings.statement_timeout_ms,
        max_pattern_chars=settings.grep_max_pattern_chars,
        half_life_hours=settings.grep_recency_half_life_hours,
    )


def start_expand_query(
    session: Session,
    tenant_id: str,
    selector: ScopeSelector,
    request: ExpandQueryRequest,
    settings: Settings,
    now: datetime | None = None,
) -> Grant:
    """Validate the request and issue its grant; the caller commits, then enqueues."""
    if not request.prompt.strip():
        raise InvalidInput("prompt must not be empty")
    if not request.query and not request.summary_ids:
        raise InvalidInput("give a query, summary_ids, or both")
    repo = HistoryRepository(session)
    summaries = repo.summaries(tenant_id, list(request.summary_ids))
    missing = [sid for sid in request.summary_ids if sid not in summaries]
    if missing:
        raise NotFound(f"no summary {missing[0]}")
    if selector.given == 0 and summaries:
        # No explicit scope: the conversations of the summaries asked about.
        ids = sorted({s.conversation_id for s in summaries.values()})
    elif selector.all_conversations and selector.given == 1:
        cap = settings.expand_query_max_conversations
        ids = repo.tenant_conversation_ids(tenant_id, cap + 1)
        if len(ids) > cap:
            raise InvalidInput(
                f"all_conversations covers more than {cap} conversations; give a session_key "
                "or conversation_id",
                code="scope_too_large",
            )
    elif selector.given == 1:
        ids = conversation_ids(session, tenant_id, selector)
    else:
        raise InvalidInput(
            "give at most one scope: session_key, conversation_id or all_conversations",
            code="scope_required",
        )
    outside = [s.id for s in summaries.values() if s.conversation_id not in ids]
    if outside:
        raise NotFound(f"no summary {outside[0]} in this scope")
    return issue_grant(
        session,
        tenant_id,
        ids,
        settings.expand_query_token_cap,
        settings.expand_query_timeout_seconds + GRANT_MARGIN_SECONDS,
        now or utcnow(),
        request=request.to_json(),
    )


def ask_expand_query(
    transaction: Transaction,
    tenant_id: str,
    effective: Settings,
    selector: ScopeSelector,
    request: ExpandQueryRequest,
    link: WorkerLink,
) -> dict[str, Any]:
    """The API's use case: one expand-query, answered by a worker, as its JSON answer.

    The grant commits before the job leaves (the worker must find it); a
    wait that fails revokes the grant so a late loop stops reading. 429
    ``llm_budget_exhausted`` once the tenant's daily LLM token budget is spent.
    ``effective`` is the tenant's effective settings (the caller's).
    """
    with transaction() as session:
        try:
            require_llm_budget(session, tenant_id, effective, "expand-query")
        except LlmBudgetExhausted:
            link.count_llm_budget_exhausted(tenant_id, "expand_query")
            raise
        grant = start_expand_query(session, tenant_id, selector, request, effective)
    try:
        link.answer_expand_query(grant.id, effective.expand_query_timeout_seconds)
    except DependencyUnavailable:
        abandon_expand_query(transaction, grant.id)  # a late loop stops reading
        raise
    answer = take_answer(transaction, grant.id)
    if answer is None:
        raise DependencyUnavailable("expand-query ended without an answer", code="expansion_lost")
    return answer


def execute_expand_query(
    transaction: Transaction,
    grant_id: str,
    tenant_id: str,
    request: ExpandQueryRequest,
    settings: Settings,
    llm: LlmConnections | LlmClients | None,
) -> ExpandQueryAnswer:
    """Run the loop under the grant, then revoke the grant (always) and record usage.

    The tenant's overrides apply per call: its ``expansion_provider`` and
    ``expansion_model`` (else the summary provider and model) and its
    ``max_expand_tokens``. The clients and the per-model breakers stay the
    process's, shared by every tenant. ``llm`` holds no connection offline.
    """
    with transaction() as session:
        settings = effective_settings(session, tenant_id, settings)
    tools = GrantedTools(
        transaction, grant_id, tenant_id, grep_limits(settings), settings.max_expand_tokens
    )
    answer: ExpandQueryAnswer | None = None
    try:
        answer = run_expand_query(
            tools,
            request,
            expansion_llm(LlmConnections.of(llm), settings),
            max_turns=settings.expand_query_max_turns,
            budget=settings.expand_query_token_cap,
        )
        return answer
    finally:
        # Revoked even when the loop failed: a grant never outlives its loop.
        with transaction() as session:
            revoke_grant(session, grant_id)
            if answer is not None and answer.usage:
                GrantRepository(session).record_usage(
                    LlmUsage.from_calls(tenant_id, None, "expansion", answer.usage)
                )


def expansion_llm(connections: LlmConnections, settings: Settings) -> LoopLlm | None:
    """The loop's model on its provider's connection; ``None`` offline (no provider at all).

    :class:`SummarizerError` ``provider_not_configured`` when the tenant
    chose a provider this deployment has no key or endpoint for.
    """
    if not connections.any:
        return None
    route = model_route(settings, "expansion")
    if route.provider == "openai" and connections.openai is not None:
        return ChatExpansionLlm(connections.openai, route.model)
    if route.provider == "anthropic" and connections.anthropic is not None:
        return ExpansionLlm(connections.anthropic, route.model)
    raise SummarizerError(
        f"expand-query provider {route.provider!r} is not configured on this deployment",
        code="provider_not_configured",
    )


def answer_granted_query(
    transaction: Transaction,
    grant_id: str,
    settings: Settings,
    llm: LlmConnections | LlmClients | None,
) -> tuple[str, ExpandQueryAnswer]:
    """The worker's side: run the request stored on the grant, store the answer on it.

    Returns the grant's tenant and the answer (for the worker's usage figures).

    :class:`GrantEnded` when the grant is gone or its request was cleared
    (the API stopped waiting, or a redelivered job after the answer was read).
    """
    with transaction() as session:
        stored = GrantRepository(session).request_of(grant_id)
    if stored is None:
        raise GrantEnded(f"expansion grant {grant_id} has ended")
    tenant_id, request = stored
    answer = execute_expand_query(
        transaction, grant_id, tenant_id, ExpandQueryRequest.from_json(request), settings, llm
    )
    result: dict[str, Any] = to_jsonable(answer)
    result.pop("usage", None)
    with transaction() as session:
        GrantRepository(session).set_answer(grant_id, result)
    return tenant_id, answer


def take_answer(transaction: Transaction, grant_id: str) -> dict[str, Any] | None:
    """The API's side once the job finished: the answer, cleared with the request."""
    with transaction() as session:
        return GrantRepository(session).take_answer(grant_id)


def abandon_expand_query(transaction: Transaction, grant_id: str) -> None:
    """The caller stopped waiting: revoke the grant so the loop's next read fails.

    The request and any answer are cleared too: nobody will read them.
    """
    with transaction() as session:
        revoke_grant(session, grant_id)
        GrantRepository(session).clear_texts(grant_id)

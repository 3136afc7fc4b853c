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

import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from lcm.db.engine import Transaction
from lcm.db.models import LlmUsage, Summary, utcnow
from lcm.errors import (
    DependencyUnavailable,
    InvalidInput,
    LlmBudgetExhausted,
    NotFound,
    SummarizerError,
)
from lcm.retrieval.agent_tools import GrantedTools, GrantEnded, to_jsonable
from lcm.retrieval.answers import ExpandQueryAnswer, ExpandQueryRequest, Usage
from lcm.retrieval.expand_across import LoopLimits, run_plan
from lcm.retrieval.expand_query import ExpansionLlm, LoopLlm
from lcm.retrieval.expand_query_chat import ChatExpansionLlm
from lcm.retrieval.expansion_lease import caller_session, hold_session, release_session
from lcm.retrieval.expansion_plan import (
    ExpansionPlan,
    PlanInputs,
    PlannedConversation,
    plan_expansion,
)
from lcm.retrieval.grants import Grant, issue_grant, revoke_grant
from lcm.retrieval.grants_repository import GrantRepository
from lcm.retrieval.grep import GrepLimits
from lcm.retrieval.repository import HistoryRepository
from lcm.retrieval.scope import ScopeSelector, conversation_ids
from lcm.retrieval.semantic_grep import SemanticOptions
from lcm.settings import Settings
from lcm.summarize import LlmClients, LlmConnections, model_route
from lcm.tenants.service import effective_settings
from lcm.tenants.spend import require_llm_budget
from lcm.worker_link import WorkerLink

# The grant outlives the API's wait a little: a job that starts just before the
# deadline may finish its current call; it never outlives this margin.
GRANT_MARGIN_SECONDS = 30.0
# How long past the call's deadline the API waits for the worker's answer: the
# worker stops at the deadline and stores what it has, which takes a moment.
ANSWER_GRACE_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class ExpansionCaller:
    """Who asks: the tenant, its effective settings, and the API key (the session fallback)."""

    tenant_id: str
    settings: Settings
    key_id: int | None = None


def grep_limits(settings: Settings) -> GrepLimits:
    return GrepLimits(
        timeout_ms=settings.statement_timeout_ms,
        max_pattern_chars=settings.grep_max_pattern_chars,
        half_life_hours=settings.grep_recency_half_life_hours,
        semantic=SemanticOptions(
            settings.semantic, settings.semantic_query_handling, settings.semantic_min_similarity
        ),
    )


def start_expand_query(
    session: Session,
    tenant_id: str,
    selector: ScopeSelector,
    request: ExpandQueryRequest,
    settings: Settings,
    now: datetime | None = None,
) -> Grant:
    """Validate the request, plan it and issue its grant; the caller commits, then enqueues.

    The plan (:mod:`lcm.retrieval.expansion_plan`) is stored with the request
    on the grant, and the grant covers the planned conversations only.
    """
    if not request.prompt.strip():
        raise InvalidInput("prompt must not be empty")
    if not request.query and not request.summary_ids:
        raise InvalidInput("give a query, summary_ids, or both")
    summaries = HistoryRepository(session).summaries(tenant_id, list(request.summary_ids))
    missing = [sid for sid in request.summary_ids if sid not in summaries]
    if missing:
        raise NotFound(f"no summary {missing[0]}")
    scope = _scope_ids(session, tenant_id, selector, summaries.values())
    outside = [
        s.id for s in summaries.values() if scope is not None and s.conversation_id not in scope
    ]
    if outside:
        raise NotFound(f"no summary {outside[0]} in this scope")
    now = now or utcnow()
    timeout = call_timeout_seconds(request, settings)
    inputs = PlanInputs(
        tenant_id,
        scope,
        request.query,
        list(summaries.values()),
        settings.expand_query_top_conversations,
    )
    plan = plan_expansion(
        session, inputs, grep_limits(settings), now.timestamp() + timeout, round(timeout * 1000)
    )
    return issue_grant(
        session,
        tenant_id,
        [c.conversation_id for c in plan.expand],
        settings.expand_query_token_cap,
        timeout + GRANT_MARGIN_SECONDS,
        now,
        request={**request.to_json(), "plan": plan.to_json()},
    )


def call_timeout_seconds(request: ExpandQueryRequest, settings: Settings) -> float:
    """The call's ``timeout_ms``, capped by the server's maximum (also the default)."""
    most = settings.expand_query_timeout_seconds
    if request.timeout_ms is None:
        return most
    return min(request.timeout_ms / 1000, most)


def _scope_ids(
    session: Session, tenant_id: str, selector: ScopeSelector, summaries: Iterable[Summary]
) -> list[int] | None:
    """The conversations in scope; ``None`` for all of the tenant's."""
    if selector.given == 0:
        ids = sorted({s.conversation_id for s in summaries})
        if ids:
            return ids  # no explicit scope: the conversations of the summaries asked about
    elif selector.all_conversations and selector.conversation_id is None:
        # A session_key beside all_conversations names the caller's session
        # (the busy guard's key, lcm.retrieval.expansion_lease), not the scope.
        return None
    elif selector.given == 1:
        return conversation_ids(session, tenant_id, selector)
    raise InvalidInput(
        "give at most one scope: session_key, conversation_id or all_conversations",
        code="scope_required",
    )


def ask_expand_query(
    transaction: Transaction,
    caller: ExpansionCaller,
    selector: ScopeSelector,
    request: ExpandQueryRequest,
    link: WorkerLink,
) -> dict[str, Any]:
    """The API's use case: one expand-query, answered by a worker, as its JSON answer.

    The grant and the session's lease commit before the job leaves (the
    worker must find the grant; a second call from the session must find the
    lease: 409 ``expansion_busy``); the lease is released when the wait ends,
    however it ends. A wait that fails revokes the grant so a late loop stops
    reading. 429 ``llm_budget_exhausted`` once the tenant's daily LLM token
    budget is spent.
    """
    effective, tenant_id = caller.settings, caller.tenant_id
    with transaction() as session:
        try:
            require_llm_budget(session, tenant_id, effective, "expand-query")
        except LlmBudgetExhausted:
            link.count_llm_budget_exhausted(tenant_id, "expand_query")
            raise
        grant = start_expand_query(session, tenant_id, selector, request, effective)
        timeout = call_timeout_seconds(request, effective)
        owner = caller_session(session, tenant_id, selector, caller.key_id)
        hold_session(session, tenant_id, owner, grant.id, utcnow(), timeout + GRANT_MARGIN_SECONDS)
    try:
        return _wait_for_answer(transaction, grant, timeout, link, effective)
    finally:
        with transaction() as session:
            release_session(session, tenant_id, owner, grant.id)


def _wait_for_answer(
    transaction: Transaction, grant: Grant, timeout: float, link: WorkerLink, settings: Settings
) -> dict[str, Any]:
    if not grant.conversation_ids:
        # Nothing in scope to expand: the answer is the plan's breakdown, no job.
        empty = execute_expand_query(transaction, grant.id, grant.tenant_id, None, settings, None)
        abandon_expand_query(transaction, grant.id)  # clears the stored request
        return _public(empty)
    try:
        # The worker stops at the deadline and answers with what it has; the
        # grace lets that answer arrive.
        link.answer_expand_query(grant.id, timeout + ANSWER_GRACE_SECONDS)
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
    request: ExpandQueryRequest | None,
    settings: Settings,
    llm: LlmConnections | LlmClients | None,
) -> ExpandQueryAnswer:
    """Run the plan stored on the grant, then revoke the grant (always) and record usage.

    ``request`` may be ``None`` (the one stored on the grant). The tenant's
    overrides apply per call: its ``expansion_provider`` and
    ``expansion_model`` (else the summary provider and model,
    :func:`expansion_llm`) and its ``max_expand_tokens``. The clients and the
    per-model breakers stay the process's, shared by every tenant. ``llm``
    holds no connection offline.
    """
    with transaction() as session:
        settings = effective_settings(session, tenant_id, settings)
        plan, stored = _stored_plan(session, grant_id, settings)
    request = request or ExpandQueryRequest.from_json(stored)
    limits = grep_limits(settings)

    def tools_for(conversation_id: int) -> GrantedTools:
        return GrantedTools(
            transaction,
            grant_id,
            tenant_id,
            limits,
            settings.max_expand_tokens,
            only=frozenset({conversation_id}),
        )

    spent: list[Usage] = []
    try:
        loop = LoopLimits(settings.expand_query_max_turns, settings.expand_query_token_cap)
        # Inside the try: a provider the deployment lacks still revokes the grant.
        loop_llm = expansion_llm(LlmConnections.of(llm), settings)
        return run_plan(tools_for, plan, request, loop_llm, loop, spent=spent)
    finally:
        # Revoked even when the loop failed: a grant never outlives its loop.
        # What the model calls cost is recorded whatever happened to them.
        with transaction() as session:
            revoke_grant(session, grant_id)
            if spent:
                GrantRepository(session).record_usage(
                    LlmUsage.from_calls(tenant_id, None, "expansion", spent)
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


def _stored_plan(
    session: Session, grant_id: str, settings: Settings
) -> tuple[ExpansionPlan, dict[str, Any]]:
    """The plan and request stored on the grant.

    A grant issued without a plan (by an older API during an upgrade) is
    expanded conversation by conversation under the server's deadline.
    """
    row = GrantRepository(session).get(grant_id)
    if row is None:
        raise GrantEnded(f"expansion grant {grant_id} has ended")
    stored = dict(row.request or {})
    if "plan" in stored:
        return ExpansionPlan.from_json(stored["plan"]), stored
    timeout = settings.expand_query_timeout_seconds
    entries = tuple(PlannedConversation(cid, None) for cid in sorted(row.conversation_ids))
    return ExpansionPlan(time.time() + timeout, round(timeout * 1000), entries), stored


def _public(answer: ExpandQueryAnswer) -> dict[str, Any]:
    result: dict[str, Any] = to_jsonable(answer)
    result.pop("usage", None)
    return result


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
    with transaction() as session:
        GrantRepository(session).set_answer(grant_id, _public(answer))
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

"""Console search and the live debt view, with its "compact now" and "retry" forms."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from api.console.auth import CheckedForm, ConsoleUser
from api.console.params import QueryText, number
from api.console.rendering import render
from api.contract import Text
from api.deps import DatabaseDep, ReadSessionDep, ServicesDep, SettingsDep
from api.heavy_work import HeavyKind, heavy_share
from lcm.console.actions import owe_manual_compaction, retry_conversation
from lcm.console.views import live_debts
from lcm.errors import InvalidInput
from lcm.retrieval.expansion import grep_limits
from lcm.retrieval.grep import GrepQuery, GrepResult, grep
from lcm.retrieval.scope import ScopeSelector, resolve_bounds
from lcm.tenants.service import effective_settings

router = APIRouter(prefix="/console", include_in_schema=False)
LIVE_ROWS = 200


async def _search_slot(request: Request, console: ConsoleUser) -> AsyncIterator[None]:
    """A grep like ``/v1/grep``: it waits for one of the tenant's heavy read slots."""
    async with heavy_share(request).slot(console.principal.tenant_id, HeavyKind.READ):
        yield


@router.get("/search", dependencies=[Depends(_search_slot)])
def search(
    request: Request,
    console: ConsoleUser,
    session: ReadSessionDep,
    settings: SettingsDep,
    q: QueryText = "",
    # No mode: hybrid where the deployment has semantic recall on, else full text.
    mode: Literal["regex", "full_text", "hybrid", "semantic"] | None = None,
    scope: Literal["messages", "summaries", "both"] = "both",
    # A string: the form sends an empty field when no conversation is given.
    conversation: Annotated[Text, Query(max_length=19)] = "",
) -> HTMLResponse:
    result: GrepResult | None = None
    error: str | None = None
    mode = mode or ("hybrid" if settings.semantic else "full_text")
    selector = (
        ScopeSelector(conversation_id=number(conversation, "conversation"))
        if conversation
        else ScopeSelector(all_conversations=True)
    )
    if q:
        try:
            bounds = resolve_bounds(session, console.principal.tenant_id, selector)
            # By meaning, newest first would bury the nearest text among the merely near.
            by_meaning = mode in ("hybrid", "semantic")
            query = GrepQuery(q, mode, scope, "relevance" if by_meaning else "recency", 100)
            # The tenant's own grep settings (semantic_query_handling, …), as /v1/grep.
            effective = effective_settings(session, console.principal.tenant_id, settings)
            result = grep(session, bounds, query, grep_limits(effective))
        except InvalidInput as refused:
            error = refused.message
    return render(
        request,
        "search.html",
        console,
        q=q,
        mode=mode,
        semantic=settings.semantic,
        scope=scope,
        conversation=conversation,
        result=result,
        error=error,
    )


@router.get("/live")
def live(
    request: Request,
    console: ConsoleUser,
    session: ReadSessionDep,
    done: Annotated[Text, Query(max_length=100)] = "",
) -> HTMLResponse:
    debts = live_debts(session, console.principal.tenant_id, LIVE_ROWS)
    return render(
        request,
        "live.html",
        console,
        counts=debts.counts,
        owed=debts.owed,
        oldest=debts.owed[0].updated_at if debts.owed else None,
        failed=debts.failed,
        done=done or None,
    )


def _conversation_id(form: CheckedForm) -> int:
    return number(form.get("conversation_id"), "conversation_id")


@router.post("/live/compact")
def compact_now(
    console: ConsoleUser,
    form: CheckedForm,
    database: DatabaseDep,
    settings: SettingsDep,
    services: ServicesDep,
) -> RedirectResponse:
    """Owe a manual compaction (as ``POST …/compact`` does, without waiting for it)."""
    compacted = owe_manual_compaction(
        database.transaction,
        lambda: services.compaction_jobs("api"),
        console.principal.tenant_id,
        _conversation_id(form),
        settings,
    )
    return RedirectResponse(f"/console/live?done=compact-{compacted}", status_code=303)


@router.post("/live/retry")
def retry(console: ConsoleUser, form: CheckedForm, database: DatabaseDep) -> RedirectResponse:
    """Re-arm a failed debt (``lcm debt retry`` for one conversation)."""
    retried = retry_conversation(
        database.transaction, console.principal.tenant_id, _conversation_id(form)
    )
    return RedirectResponse(f"/console/live?done=retry-{retried}", status_code=303)

"""Console pages that read: conversations, one conversation, a summary, messages, usage."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from api.console.auth import ConsoleUser
from api.console.params import ConversationId, Int64, PageNumber, level_pages
from api.console.rendering import render
from api.contract import Text
from api.deps import ReadSessionDep, SettingsDep, SnapshotSessionDep
from lcm.console.dag_layout import lay_out
from lcm.console.views import (
    PAGE_SIZE,
    context_window,
    conversation_of,
    conversation_table,
    leaf_sources,
    message_page,
    run_timeline,
)
from lcm.conversations.dag_view import load_dag
from lcm.errors import NotFound
from lcm.int64 import INT64_MAX
from lcm.retrieval.describe import describe_summary
from lcm.tenants.service import effective_settings
from lcm.tenants.usage import usage_report

router = APIRouter(prefix="/console", include_in_schema=False)


@router.get("")
def home() -> RedirectResponse:
    return RedirectResponse("/console/conversations", status_code=303)


@router.get("/conversations")
def conversations(
    request: Request,
    console: ConsoleUser,
    session: ReadSessionDep,
    settings: SettingsDep,
    prefix: Annotated[Text, Query(max_length=500)] = "",
    sort: Literal["id", "key", "messages", "tokens", "updated"] = "id",
    order: Literal["asc", "desc"] = "desc",
    page: PageNumber = 1,
) -> HTMLResponse:
    tenant_id = console.principal.tenant_id
    table = conversation_table(
        session,
        tenant_id,
        effective_settings(session, tenant_id, settings),
        settings.default_token_budget,
        key_prefix=prefix or None,
        sort=sort,
        descending=order == "desc",
        page=page,
    )
    return render(
        request, "conversations.html", console, table=table, prefix=prefix, sort=sort, order=order
    )


@router.get("/conversations/{conversation_id}")
def conversation(
    request: Request,
    conversation_id: ConversationId,
    console: ConsoleUser,
    session: SnapshotSessionDep,  # the window, the split, the DAG and the runs: one moment
    settings: SettingsDep,
    budget: Annotated[Int64 | None, Query(ge=1, le=10_000_000)] = None,
    runs_page: PageNumber = 1,
) -> HTMLResponse:
    tenant_id = console.principal.tenant_id
    found = conversation_of(session, tenant_id, conversation_id)
    effective = effective_settings(session, tenant_id, settings)
    budget = budget or settings.default_token_budget
    # Per-depth page of the DAG rows: ?level3=1 shows the second-newest page of depth 3.
    pages = level_pages(request.query_params)
    return render(
        request,
        "conversation.html",
        console,
        conversation=found,
        window=context_window(session, found.id, budget, effective),
        dag=lay_out(load_dag(session, found.id), pages),
        level_pages=pages,
        runs=run_timeline(session, found.id, settings.model_prices, runs_page),
    )


@router.get("/summaries/{summary_id}")
def summary(
    request: Request,
    summary_id: Annotated[Text, Path(min_length=1, max_length=64)],
    console: ConsoleUser,
    session: ReadSessionDep,
    settings: SettingsDep,
    offset: Annotated[Int64, Query(ge=0, le=10_000_000)] = 0,
    done: Annotated[Text, Query(max_length=100)] = "",
) -> HTMLResponse:
    tenant_id = console.principal.tenant_id
    mask = effective_settings(session, tenant_id, settings).masks_secrets("console")
    described = describe_summary(session, tenant_id, summary_id, mask=mask)
    sources, source_total = (
        leaf_sources(session, tenant_id, summary_id, offset, mask)
        if described.kind == "leaf"
        else ([], 0)
    )
    return render(
        request,
        "summary.html",
        console,
        summary=described,
        sources=sources,
        source_total=source_total,
        offset=offset,
        page_size=PAGE_SIZE,
        done=done or None,
    )


@router.get("/conversations/{conversation_id}/messages")
def messages(
    request: Request,
    conversation_id: ConversationId,
    console: ConsoleUser,
    session: ReadSessionDep,
    settings: SettingsDep,
    seq: Annotated[Int64 | None, Query(ge=1, le=INT64_MAX)] = None,
    start: Annotated[Int64 | None, Query(ge=1, le=INT64_MAX)] = None,
) -> HTMLResponse:
    found = conversation_of(session, console.principal.tenant_id, conversation_id)
    mask = effective_settings(session, found.tenant_id, settings).masks_secrets("console")
    if seq is not None and seq > found.last_seq:
        raise NotFound(f"no message {seq} in conversation {conversation_id}")
    first = start if start is not None else max(1, (seq or 1) - PAGE_SIZE // 2)
    page = message_page(session, found, first, seq, mask)
    return render(request, "messages.html", console, conversation=found, page=page)


@router.get("/usage")
def usage(
    request: Request,
    console: ConsoleUser,
    session: ReadSessionDep,
    settings: SettingsDep,
    days: Annotated[Int64, Query(ge=1, le=366)] = 30,
) -> HTMLResponse:
    """lcm's own LLM use and the host's model tokens (cache reads and writes), by day."""
    today = datetime.now(UTC).date()
    since = datetime.combine(today - timedelta(days=days - 1), time(), UTC)
    report = usage_report(session, console.principal.tenant_id, since, settings.model_prices)
    return render(request, "usage.html", console, report=report, days=days)

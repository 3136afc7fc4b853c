"""Console forms on a summary's page: rewrite it (or its subtree) and dissolve it."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path
from fastapi.responses import RedirectResponse

from api.console.auth import CheckedForm, ConsoleUser
from api.contract import Text
from api.deps import DatabaseDep, ServicesDep, SettingsDep
from lcm.console.actions import operate_on_summary
from lcm.surgery import SurgeryAsk

router = APIRouter(prefix="/console", include_in_schema=False)
SummaryId = Annotated[Text, Path(min_length=1, max_length=64)]


def _instructions(form: CheckedForm) -> str | None:
    """The form's instructions; ``lcm.surgery`` refuses them over its limit (400)."""
    given = form.get("instructions")
    return (given.strip() if isinstance(given, str) else "") or None


@router.post("/summaries/{summary_id}/rewrite")
def rewrite(
    summary_id: SummaryId,
    console: ConsoleUser,
    form: CheckedForm,
    database: DatabaseDep,
    settings: SettingsDep,
    services: ServicesDep,
) -> RedirectResponse:
    """Rewrite the summary with the LLM (``POST /v1/tenant/summaries/{id}/rewrite``)."""
    ask = SurgeryAsk(summary_id, "rewrite", form.get("subtree") == "on", _instructions(form))
    return _operate(ask, console, database, settings, services)


@router.post("/summaries/{summary_id}/dissolve")
def dissolve(
    summary_id: SummaryId,
    console: ConsoleUser,
    form: CheckedForm,
    database: DatabaseDep,
    settings: SettingsDep,
    services: ServicesDep,
) -> RedirectResponse:
    """Put the condensed summary's sources back in the context in its place."""
    return _operate(SurgeryAsk(summary_id, "dissolve"), console, database, settings, services)


def _operate(
    ask: SurgeryAsk,
    console: ConsoleUser,
    database: DatabaseDep,
    settings: SettingsDep,
    services: ServicesDep,
) -> RedirectResponse:
    found = operate_on_summary(
        database.transaction,
        lambda: services.compaction_jobs("api"),
        console.principal.tenant_id,
        ask,
        settings,
    )
    done = f"{found.action}-{found.operation_id}-{found.status}"
    return RedirectResponse(f"/console/summaries/{ask.summary_id}?done={done}", status_code=303)

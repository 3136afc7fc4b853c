"""The deployment's limits are ceilings for what a tenant sets itself.

A tenant's admin key may lower a quota, a rate, a budget or a cap below the
deployment's value, never raise it above (nor switch it off): that is an
operator's grant, made on the database (``lcm tenant settings``) and logged.

A tenant's stored overrides hold its own values, and under :data:`GRANTS`
the operator's grants (``{setting: value}``). What applies:

* the ceiling of a setting for a tenant is the operator's grant when there
  is one, else the deployment's value;
* a grant is the tenant's value unless the tenant set a lower one;
* a tenant's own value above its ceiling (stored before ceilings were
  enforced, or the deployment lowered its value later) is clamped to the
  ceiling when read; a grant stays as the operator set it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel

from lcm.errors import Forbidden

GRANTS = "_operator_grants"

M = TypeVar("M", bound=BaseModel)


def _positive(name: str) -> Callable[[Any], float | None]:
    """A limit where 0, like None, means unlimited."""
    return lambda s: getattr(s, name) or None


def _as_is(name: str) -> Callable[[Any], float | None]:
    """A limit where None means unlimited (0 is a limit of zero)."""
    return lambda s: getattr(s, name)


def _burst(s: Any) -> float | None:
    # The bucket's size as api/rate_limit.py derives it: no bucket without a rate.
    if not s.rate_limit_per_second:
        return None
    return float(s.rate_limit_burst or max(1, math.ceil(s.rate_limit_per_second)))


# Each limit a tenant may lower but not raise, read as a number (None: unlimited).
CEILINGS: dict[str, Callable[[Any], float | None]] = {
    "rate_limit_per_second": _positive("rate_limit_per_second"),
    "rate_limit_burst": _burst,
    "max_stored_messages": _positive("max_stored_messages"),
    "max_file_bytes": _positive("max_file_bytes"),
    "llm_daily_token_budget": _as_is("llm_daily_token_budget"),
    "max_assembly_token_budget": _as_is("max_assembly_token_budget"),
    "summary_max_calls_per_window": _as_is("summary_max_calls_per_window"),
    "sweep_max_passes": _as_is("sweep_max_passes"),
    "sweep_max_seconds": _as_is("sweep_max_seconds"),
    "max_expand_tokens": _as_is("max_expand_tokens"),
}


class AboveCeiling(Forbidden):
    """A tenant tried to raise (or switch off) a limit above its deployment's value."""

    code = "above_ceiling"

    def __init__(self, setting: str, ceiling: Any) -> None:
        super().__init__(
            f"{setting} may not be raised above {ceiling!r}, this deployment's limit "
            "(or switched off); an operator can raise it (lcm tenant settings)"
        )
        self.details = {"setting": setting, "ceiling": ceiling}


def exceeds(value: float | None, ceiling: float | None) -> bool:
    return ceiling is not None and (value is None or value > ceiling)


def check_within(changed: set[str], proposed: BaseModel, ceiling: BaseModel) -> None:
    """Raise :class:`AboveCeiling` for the first of ``changed`` that ``proposed`` sets
    above ``ceiling``."""
    for name in sorted(changed & set(CEILINGS)):
        limit = CEILINGS[name]
        most = limit(ceiling)
        if exceeds(limit(proposed), most):
            raw = getattr(ceiling, name)  # None for a burst derived from the rate
            raise AboveCeiling(name, raw if raw is not None else int(most or 0))


def clamped(effective: M, ceiling: BaseModel, tenant_set: set[str]) -> M:
    """``effective`` with each limit the tenant set itself lowered to ``ceiling``'s."""
    update = {}
    for name in tenant_set & set(CEILINGS):
        if name not in type(effective).model_fields:
            continue
        limit = CEILINGS[name]
        if exceeds(limit(effective), limit(ceiling)):
            update[name] = getattr(ceiling, name)
    return effective.model_copy(update=update) if update else effective

"""A tenant's usage: LLM tokens, passes and an estimated cost, by UTC day and model,
and by purpose (summaries, large files, expand-query) and provider; and the host's
own model tokens its turns reported, cache reads and writes included."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime

from sqlalchemy.orm import Session

from lcm.settings import ModelPrice
from lcm.tenants.usage_repository import HostTokenRow, TokenRow, UsageRepository


@dataclass(frozen=True, slots=True)
class UsageLine:
    day: date
    model: str
    calls: int  # LLM calls (summaries, expand-query turns, file summaries)
    passes: int  # summaries written
    input_tokens: int
    output_tokens: int
    estimated_cost_usd: float | None  # None: no price for the model


@dataclass(frozen=True, slots=True)
class PurposeLine:
    """The window's calls of one purpose on one provider's model."""

    purpose: str  # summary | file | expansion
    provider: str  # anthropic | openai | offline
    model: str
    calls: int
    input_tokens: int  # output includes thinking/reasoning tokens (billed as output)
    output_tokens: int
    estimated_cost_usd: float | None


@dataclass(frozen=True, slots=True)
class HostUsageLine:
    """The host's model calls of one UTC day and model, as its turns reported them."""

    day: date
    model: str  # "" when the turns named none
    turns: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int

    @classmethod
    def of(cls, row: HostTokenRow) -> HostUsageLine:
        return cls(
            date.fromisoformat(row.day),
            row.model,
            row.turns,
            row.input_tokens,
            row.output_tokens,
            row.cache_read_tokens,
            row.cache_write_tokens,
        )


@dataclass(frozen=True, slots=True)
class HostUsageTotals:
    """The window's host usage summed; ``cache_read_share`` of all prompt tokens."""

    turns: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cache_read_share: float | None  # None: no prompt tokens reported

    @classmethod
    def of(cls, lines: list[HostUsageLine]) -> HostUsageTotals:
        read = sum(line.cache_read_tokens for line in lines)
        prompt = read + sum(line.input_tokens + line.cache_write_tokens for line in lines)
        return cls(
            turns=sum(line.turns for line in lines),
            input_tokens=sum(line.input_tokens for line in lines),
            output_tokens=sum(line.output_tokens for line in lines),
            cache_read_tokens=read,
            cache_write_tokens=sum(line.cache_write_tokens for line in lines),
            cache_read_share=round(read / prompt, 4) if prompt else None,
        )


@dataclass(frozen=True, slots=True)
class UsageReport:
    since: datetime
    lines: list[UsageLine]
    by_purpose: list[PurposeLine]
    host_lines: list[HostUsageLine]
    host: HostUsageTotals
    input_tokens: int
    output_tokens: int
    passes: int
    estimated_cost_usd: float  # of the lines with a price
    unpriced_models: list[str]


def price_for(model: str, prices: Mapping[str, ModelPrice]) -> ModelPrice | None:
    """The model's price: an exact entry, else the longest listed prefix (dated ids)."""
    if model in prices:
        return prices[model]
    prefixes = [name for name in prices if model.startswith(name)]
    return prices[max(prefixes, key=len)] if prefixes else None


def estimate_cost(
    model: str, input_tokens: int, output_tokens: int, prices: Mapping[str, ModelPrice]
) -> float | None:
    """US dollars at list price; 0 for no tokens (the offline summarizer); None if unpriced."""
    if input_tokens == 0 and output_tokens == 0:
        return 0.0
    price = price_for(model, prices)
    if price is None:
        return None
    cost = input_tokens * price.input_per_mtok + output_tokens * price.output_per_mtok
    return round(cost / 1_000_000, 6)


def usage_report(
    session: Session, tenant_id: str, since: datetime, prices: Mapping[str, ModelPrice]
) -> UsageReport:
    repo = UsageRepository(session)
    tokens = {(r.day, r.model): r for r in repo.tokens_by_day_and_model(tenant_id, since)}
    passes = repo.passes_by_day_and_model(tenant_id, since)
    lines = []
    for key in sorted(tokens.keys() | passes.keys()):
        row = tokens.get(key) or TokenRow(key[0], key[1], 0, 0, 0)
        lines.append(
            UsageLine(
                day=date.fromisoformat(row.day),
                model=row.model,
                calls=row.calls,
                passes=passes.get(key, 0),
                input_tokens=row.input_tokens,
                output_tokens=row.output_tokens,
                estimated_cost_usd=estimate_cost(
                    row.model, row.input_tokens, row.output_tokens, prices
                ),
            )
        )
    by_purpose = [
        PurposeLine(
            r.purpose,
            r.provider,
            r.model,
            r.calls,
            r.input_tokens,
            r.output_tokens,
            estimate_cost(r.model, r.input_tokens, r.output_tokens, prices),
        )
        for r in sorted(
            repo.tokens_by_purpose(tenant_id, since),
            key=lambda r: (r.purpose, r.provider, r.model),
        )
    ]
    costs = [line.estimated_cost_usd for line in lines if line.estimated_cost_usd is not None]
    host_lines = [
        HostUsageLine.of(row)
        for row in sorted(
            repo.host_tokens_by_day_and_model(tenant_id, since), key=lambda r: (r.day, r.model)
        )
    ]
    return UsageReport(
        since=since,
        lines=lines,
        by_purpose=by_purpose,
        host_lines=host_lines,
        host=HostUsageTotals.of(host_lines),
        input_tokens=sum(line.input_tokens for line in lines),
        output_tokens=sum(line.output_tokens for line in lines),
        passes=sum(line.passes for line in lines),
        estimated_cost_usd=round(sum(costs), 6),
        unpriced_models=sorted({ln.model for ln in lines if ln.estimated_cost_usd is None}),
    )

"""All SQL behind a tenant's usage report: LLM tokens and summaries, by UTC day and model."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import Session

from lcm.db.models import HostUsage, LlmUsage, Summary
from lcm.summarize.extractive import EXTRACTIVE_MODEL


@dataclass(frozen=True, slots=True)
class TokenRow:
    day: str  # YYYY-MM-DD, UTC
    model: str
    calls: int
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class PurposeRow:
    purpose: str  # summary | file | expansion
    provider: str  # anthropic | openai | offline
    model: str
    calls: int
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class HostTokenRow:
    """The host's reported model usage of one (UTC day, model)."""

    day: str  # YYYY-MM-DD, UTC
    model: str  # "" when the turns named none
    turns: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int


class UsageRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def tokens_by_day_and_model(self, tenant_id: str, since: datetime) -> list[TokenRow]:
        """One row per (UTC day, model): LLM calls and their tokens, every purpose together."""
        day = self._utc_day(LlmUsage.created_at)
        rows = self.session.execute(
            select(
                day,
                LlmUsage.model,
                func.count(),
                func.coalesce(func.sum(LlmUsage.input_tokens), 0),
                func.coalesce(func.sum(LlmUsage.output_tokens), 0),
            )
            .where(LlmUsage.tenant_id == tenant_id, LlmUsage.created_at >= since)
            .group_by(day, LlmUsage.model)
        )
        return [TokenRow(str(d), str(m), int(c), int(i), int(o)) for d, m, c, i, o in rows]

    def tokens_by_purpose(self, tenant_id: str, since: datetime) -> list[PurposeRow]:
        """One row per (purpose, provider, model) over the whole window."""
        rows = self.session.execute(
            select(
                LlmUsage.purpose,
                LlmUsage.provider,
                LlmUsage.model,
                func.count(),
                func.coalesce(func.sum(LlmUsage.input_tokens), 0),
                func.coalesce(func.sum(LlmUsage.output_tokens), 0),
            )
            .where(LlmUsage.tenant_id == tenant_id, LlmUsage.created_at >= since)
            .group_by(LlmUsage.purpose, LlmUsage.provider, LlmUsage.model)
        )
        return [
            PurposeRow(str(u), str(p), str(m), int(c), int(i), int(o)) for u, p, m, c, i, o in rows
        ]

    def llm_tokens_since(self, tenant_id: str, since: datetime) -> int:
        """Input plus output tokens the tenant's LLM calls used from ``since`` on.

        The offline extractive summarizer records its calls too (model
        ``extractive``); they cost nothing and do not count.
        """
        total = self.session.scalar(
            select(
                func.coalesce(func.sum(LlmUsage.input_tokens + LlmUsage.output_tokens), 0)
            ).where(
                LlmUsage.tenant_id == tenant_id,
                LlmUsage.created_at >= since,
                LlmUsage.model != EXTRACTIVE_MODEL,
            )
        )
        return int(total or 0)

    def passes_by_day_and_model(
        self, tenant_id: str, since: datetime
    ) -> dict[tuple[str, str], int]:
        """Summaries written (one per successful pass) per (UTC day, model), offline ones too."""
        day = self._utc_day(Summary.created_at)
        rows = self.session.execute(
            select(day, Summary.model, func.count())
            .where(Summary.tenant_id == tenant_id, Summary.created_at >= since)
            .group_by(day, Summary.model)
        )
        return {(str(d), str(m)): int(c) for d, m, c in rows}

    def add_host_usage(
        self,
        tenant_id: str,
        conversation_id: int,
        model: str,
        tokens: tuple[int, int, int, int],
    ) -> None:
        """One row: input, output, cache read and cache write tokens, in that order."""
        input_tokens, output_tokens, cache_read, cache_write = tokens
        self.session.add(
            HostUsage(
                tenant_id=tenant_id,
                conversation_id=conversation_id,
                model=model,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                cache_read_tokens=cache_read,
                cache_write_tokens=cache_write,
            )
        )

    def host_tokens_by_day_and_model(self, tenant_id: str, since: datetime) -> list[HostTokenRow]:
        """The host's reported usage per (UTC day, model) from ``since`` on."""
        day = self._utc_day(HostUsage.created_at)
        sums = [
            func.coalesce(func.sum(column), 0)
            for column in (
                HostUsage.input_tokens,
                HostUsage.output_tokens,
                HostUsage.cache_read_tokens,
                HostUsage.cache_write_tokens,
            )
        ]
        rows = self.session.execute(
            select(day, HostUsage.model, func.count(), *sums)
            .where(HostUsage.tenant_id == tenant_id, HostUsage.created_at >= since)
            .group_by(day, HostUsage.model)
        )
        return [HostTokenRow(str(row[0]), str(row[1]), *(int(n) for n in row[2:])) for row in rows]

    def _utc_day(self, column: Any) -> ColumnElement[str]:
        if self.session.get_bind().dialect.name == "postgresql":
            return func.to_char(func.timezone("UTC", column), "YYYY-MM-DD")
        # SQLite stores UTC timestamps as 'YYYY-MM-DD HH:MM:SS…' text.
        return func.substr(column, 1, 10)

"""How grep ranks, as SQL expressions both databases evaluate the same way.

Used by :mod:`lcm.retrieval.search_repository` (all SQL of grep lives in these
two modules).
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import (
    ColumnElement,
    Float,
    bindparam,
    case,
    cast,
    extract,
    func,
    literal_column,
    select,
    table,
    text,
)
from sqlalchemy.dialects.postgresql import REGCONFIG

from lcm.db.models import Message, Summary, UtcDateTime
from lcm.retrieval.query import TextQuery, fts5_expression, fts5_phrase

# relevance = PHRASE_WEIGHT x [all positive terms appear as one phrase]
#           + (1 - PHRASE_WEIGHT) x the database's rank squashed into [0, 1).
# Neither ts_rank nor bm25 rewards adjacency much, so without the phrase term an
# exact phrase could rank below the same words scattered through a longer text.
PHRASE_WEIGHT = 0.5
LN2 = math.log(2)
MIN_EXPONENT = -700.0
TS_CONFIG = "english"

Target = Literal["message", "summary"]


def table_name(target: Target) -> str:
    return "messages" if target == "message" else "summaries"


def row_id(target: Target) -> Any:
    return Message.id if target == "message" else Summary.id


def hybrid(
    relevance: ColumnElement[float],
    at: Any,
    now: datetime,
    half_life_seconds: float,
    dialect: str,
) -> ColumnElement[float]:
    """relevance x 2^(-age / half_life): a match one half-life older counts half."""
    now_param = bindparam("hybrid_now", now, type_=UtcDateTime())
    if dialect == "postgresql":
        age: Any = extract("epoch", now_param - at)
        exp: Any = func.exp
    else:
        age = (func.julianday(now_param) - func.julianday(at)) * 86400.0
        exp = func.lcm_exp  # registered per connection: SQLite builds may lack exp()
    age = case((age < 0, 0.0), else_=age)
    # Clamped: Postgres raises on float underflow, and beyond ~2^-1000 every
    # match decays alike, so relevance alone still orders them.
    exponent = -LN2 * cast(age, Float) / half_life_seconds
    return relevance * exp(case((exponent < MIN_EXPONENT, MIN_EXPONENT), else_=exponent))


def tsvector_match(
    target: Target, query: TextQuery
) -> tuple[ColumnElement[bool], ColumnElement[float]]:
    tsv: Any = literal_column(f"{table_name(target)}.content_tsv")
    config = cast(TS_CONFIG, REGCONFIG)
    tsquery = func.websearch_to_tsquery(config, query.raw)
    phrase = func.phraseto_tsquery(config, query.phrase_text)
    # ts_rank_cd (cover density) rewards terms close together; 32 squashes it to [0, 1).
    rank = func.ts_rank_cd(tsv, tsquery, 32)
    relevance = PHRASE_WEIGHT * case((tsv.op("@@")(phrase), 1.0), else_=0.0)
    return tsv.op("@@")(tsquery), relevance + (1 - PHRASE_WEIGHT) * rank


def fts5_match(target: Target, query: TextQuery) -> tuple[Any, ColumnElement[float]]:
    """MATCH on the unicode61 table; the caller joins it so bm25() can rank."""
    fts = f"{table_name(target)}_fts"
    key = "rowid" if target == "message" else "summary_id"
    phrase_ids: Any = (
        select(literal_column(key))
        .select_from(table(fts))
        .where(text(f"{fts} MATCH :fts_phrase").bindparams(fts_phrase=fts5_phrase(query)))
    )
    bm25 = func.bm25(literal_column(fts))
    squashed = -bm25 / (1.0 - bm25)  # bm25 <= 0, lower is better -> [0, 1)
    phrase = case((row_id(target).in_(phrase_ids), 1.0), else_=0.0)
    relevance = PHRASE_WEIGHT * phrase + (1 - PHRASE_WEIGHT) * squashed
    match = text(f"{fts} MATCH :fts_q").bindparams(fts_q=fts5_expression(query))
    return match, relevance

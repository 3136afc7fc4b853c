"""The settings of semantic recall (the ``semantic`` extra): the deployment's and a tenant's."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

# Session info key: set on every session of a deployment with semantic on
# (lcm.db.engine), so a unit of work asks for embedding only there.
SEMANTIC_ON = "lcm_semantic_on"

QueryHandling = Literal["raw", "strip_roles", "strip_frequent", "both"]


class SemanticTenantSettings(BaseSettings):
    """What a tenant may override about semantic and hybrid grep."""

    model_config = SettingsConfigDict(env_prefix="LCM_", extra="ignore")

    # What the dense side of a semantic/hybrid grep embeds of the query:
    # ``raw`` the query as given; ``strip_roles`` without role words
    # (user, assistant, ...) and capitalised names, which otherwise pull the
    # query to turns that address a person rather than say the thing;
    # ``strip_frequent`` without words in more than 10% of the tenant's
    # embedded texts; ``both`` (lcm.semantic.query_text). ``strip_roles`` by
    # default: on a two-person chat benchmark taking names out of the query was
    # what let hybrid beat full text, and on the paraphrase recall set (bench
    # recall, real coding sessions) hybrid recall@10 was 0.774 with it, 0.706
    # with ``both`` (dropping frequent words cost more than it gave there).
    semantic_query_handling: QueryHandling = "strip_roles"
    # Where the deployment has semantic on, assemble's recall cue
    # (prompt_recall_max_snippets) also recalls by meaning: the prompt is
    # embedded and the conversation's nearest older messages are fused with
    # the identifier lookups (lcm.retrieval.prompt_meaning). Off: identifiers only.
    prompt_recall_semantic: bool = True
    # The similarity floor of recall by meaning: a dense hit below this cosine
    # similarity is not recalled by the cue and does not rank a conversation
    # for expand-query, so a prompt about nothing stored recalls nothing.
    # Chosen on the paraphrase recall set (python -m bench recall_floor).
    semantic_min_similarity: float = Field(0.45, ge=0.0, le=1.0)


class SemanticSettings(BaseSettings):
    """The deployment's semantic recall: on or off, and how its background work runs."""

    model_config = SettingsConfigDict(env_prefix="LCM_", extra="ignore")

    # Opt-in: embeds messages and summaries after commit and lets grep take
    # "mode": "semantic" / "hybrid". Needs `pip install 'lcm-server[semantic]'`.
    semantic: bool = False
    # Texts embedded per write transaction by the embed job and the backfill.
    semantic_batch: int = Field(64, ge=1, le=4_096)
    # Beat's backfill: embeds what a lost job, a crash or a model change left.
    semantic_backfill_interval_seconds: float = Field(300.0, gt=0)
    # A backfill or reindex holds its lease this long between progress updates.
    semantic_lease_seconds: int = Field(120, ge=5)

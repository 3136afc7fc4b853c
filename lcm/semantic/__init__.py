"""Semantic recall: messages and summaries embedded after commit, searched by meaning.

Opt-in per deployment (``LCM_SEMANTIC=on``) and installed as the ``semantic``
extra. Embedding runs as background work (:mod:`lcm.semantic.backlog`),
never on the ingest path; grep's ``semantic`` and ``hybrid`` modes read the
vectors (:mod:`lcm.semantic.search`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lcm.exports import lazy_exports

if TYPE_CHECKING:
    from lcm.semantic.backfill import (
        BackfillResult,
        embed_conversation,
        request_embedding,
        run_backfill,
    )
    from lcm.semantic.embedder import (
        Embedder,
        embedder_if_loaded,
        load_embedder,
        semantic_installed,
        warm_embedder,
    )
    from lcm.semantic.query_vectors import PROMPT_VECTORS, QueryVectors
    from lcm.semantic.search import (
        DenseQuery,
        DenseResult,
        dense_search,
        dense_text,
        search_vector,
    )

__all__ = [
    "PROMPT_VECTORS",
    "BackfillResult",
    "DenseQuery",
    "DenseResult",
    "Embedder",
    "QueryVectors",
    "dense_search",
    "dense_text",
    "embed_conversation",
    "embedder_if_loaded",
    "load_embedder",
    "request_embedding",
    "run_backfill",
    "search_vector",
    "semantic_installed",
    "warm_embedder",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "lcm.semantic.backfill": (
            "BackfillResult",
            "run_backfill",
            "embed_conversation",
            "request_embedding",
        ),
        "lcm.semantic.embedder": (
            "Embedder",
            "embedder_if_loaded",
            "load_embedder",
            "semantic_installed",
            "warm_embedder",
        ),
        "lcm.semantic.query_vectors": ("PROMPT_VECTORS", "QueryVectors"),
        "lcm.semantic.search": (
            "DenseQuery",
            "DenseResult",
            "dense_search",
            "dense_text",
            "search_vector",
        ),
    },
)

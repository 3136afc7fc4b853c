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
    from lcm.semantic.embedder import Embedder, load_embedder, semantic_installed
    from lcm.semantic.search import DenseQuery, DenseResult, dense_search

__all__ = [
    "BackfillResult",
    "DenseQuery",
    "DenseResult",
    "Embedder",
    "dense_search",
    "embed_conversation",
    "load_embedder",
    "request_embedding",
    "run_backfill",
    "semantic_installed",
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
        "lcm.semantic.embedder": ("Embedder", "load_embedder", "semantic_installed"),
        "lcm.semantic.search": ("DenseQuery", "DenseResult", "dense_search"),
    },
)

"""Recently embedded query texts and their vectors, per process (the assemble hot path).

A gateway assembles the same prompt more than once in a turn (a retry, a
second pass after a compaction, the plugin and the model's tool loop): the
prompt is embedded the first time (~5-20 ms of CPU) and read from here after.
A vector depends only on the text and the model, never on a tenant or on
what is stored, so an entry is never stale; the least recently used goes
first. Keys are the text as embedded (after query handling) and the model.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from lcm.semantic.embedder import Embedder

MAX_TEXT_CHARS = 4_000  # a longer prompt is embedded but not kept (the model reads ~1,000)


class QueryVectors:
    """A bounded LRU of (model, text) -> vector, shared by the process's threads."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._vectors: OrderedDict[tuple[str, str], Any] = OrderedDict()
        # Request threads read and insert at once; OrderedDict's moves are not atomic.
        self._lock = threading.Lock()

    def vector(self, embedder: Embedder, text: str, wait_seconds: float) -> Any | None:
        """``text``'s vector: kept, or embedded now; None when the model stayed busy."""
        key = (embedder.model_name, text)
        with self._lock:
            held = self._vectors.get(key)
            if held is not None:
                self._vectors.move_to_end(key)
                return held
        # Embedded outside the lock: two threads may embed one text, both get its vector.
        vector = embedder.embed_waiting(text, wait_seconds)
        if vector is None or len(text) > MAX_TEXT_CHARS:
            return None if vector is None else vector[0]
        with self._lock:
            self._vectors[key] = vector[0]
            while len(self._vectors) > self.size:
                self._vectors.popitem(last=False)
        return vector[0]

    def clear(self) -> None:
        with self._lock:
            self._vectors.clear()


PROMPT_VECTORS = QueryVectors(256)

"""A process's views of stored messages by id, for a database that never reuses an id.

A stored message never changes (nothing updates ``messages`` or
``message_parts``: a message is only ever inserted or erased), and its
id is never given twice (a Postgres sequence; SQLite's ``AUTOINCREMENT``,
migration 0024), so an id names one message for good.
Assembly reads the same newest messages turn after turn; their views (the
block payloads decoded from JSON, the parts, the view objects) are built once
per process and kept here, least recently used first out. The context items
that refer to them are still read every time, under the caller's tenant, so
the cache is only ever asked for ids the caller may see.

An erased message's view stays until it is evicted, but nothing
can ask for it again: no context item refers to it any more. The erasing
process forgets its conversations' views at once (:meth:`forget_conversations`).

The parents of condensed summaries are kept the same way, by summary id: a
summary's parents are written with it and never change (a doctor repair
rewrites a summary's content, never its links), and a summary id is random.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Generic, TypeVar

from lcm.context import MessageView

K = TypeVar("K")
V = TypeVar("V")

# Session.info key: the Database's cache, handed to every session it opens.
MESSAGE_CACHE = "lcm_message_cache"


class _Lru(Generic[K, V]):
    """At most ``capacity`` values by key, each tagged with its conversation; LRU out.

    Not locked itself: :class:`MessageCache` holds one lock over both of its.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._held: OrderedDict[K, tuple[int, V]] = OrderedDict()

    def get_many(self, keys: Iterable[K]) -> dict[K, V]:
        found: dict[K, V] = {}
        for key in keys:
            held = self._held.get(key)
            if held is not None:
                self._held.move_to_end(key)
                found[key] = held[1]
        return found

    def put_many(self, conversation_id: int, values: Mapping[K, V]) -> None:
        for key, value in values.items():
            self._held[key] = (conversation_id, value)
            self._held.move_to_end(key)
        while len(self._held) > self.capacity:
            self._held.popitem(last=False)

    def forget(self, conversation_ids: set[int]) -> None:
        for key in [k for k, (c, _) in self._held.items() if c in conversation_ids]:
            del self._held[key]

    def __len__(self) -> int:
        return len(self._held)


class MessageCache:
    """At most ``capacity`` message views by id, and as many summaries' parent ids (LRU).

    Safe to share between threads.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._views: _Lru[int, MessageView] = _Lru(capacity)
        self._parents: _Lru[str, tuple[str, ...]] = _Lru(capacity)
        # One lock for the few dict operations per call: request threads share it.
        self._lock = threading.Lock()

    def get_many(self, ids: Iterable[int]) -> dict[int, MessageView]:
        with self._lock:
            return self._views.get_many(ids)

    def put_many(self, conversation_id: int, views: Mapping[int, MessageView]) -> None:
        with self._lock:
            self._views.put_many(conversation_id, views)

    def parents_of(self, summary_ids: Iterable[str]) -> dict[str, tuple[str, ...]]:
        with self._lock:
            return self._parents.get_many(summary_ids)

    def put_parents(self, conversation_id: int, parents: Mapping[str, tuple[str, ...]]) -> None:
        with self._lock:
            self._parents.put_many(conversation_id, parents)

    def forget_conversations(self, conversation_ids: Iterable[int]) -> None:
        gone = set(conversation_ids)
        with self._lock:
            self._views.forget(gone)
            self._parents.forget(gone)

    def __len__(self) -> int:
        return len(self._views)

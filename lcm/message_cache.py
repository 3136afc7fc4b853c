"""A process's views of stored messages by id, for a database that never reuses an id.

A stored message never changes (nothing updates ``messages`` or
``message_parts``: a message is only ever inserted or erased), and on
Postgres its id comes from a sequence, so an id names one message for good.
Assembly reads the same newest messages turn after turn; their views (the
block payloads decoded from JSON, the parts, the view objects) are built once
per process and kept here, least recently used first out. The context items
that refer to them are still read every time, under the caller's tenant, so
the cache is only ever asked for ids the caller may see.

SQLite may give a deleted row's id to the next insert, so embedded mode runs
without it. An erased message's view stays until it is evicted, but nothing
can ask for it again: no context item refers to it any more. The erasing
process forgets its conversations' views at once (:meth:`forget_conversations`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping

from lcm.context import MessageView

# Session.info key: the Database's cache, handed to every session it opens.
MESSAGE_CACHE = "lcm_message_cache"


class MessageCache:
    """At most ``capacity`` message views by id (LRU); safe to share between threads."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._views: OrderedDict[int, tuple[int, MessageView]] = OrderedDict()
        # One lock for the few dict operations per call: request threads share it.
        self._lock = threading.Lock()

    def get_many(self, ids: Iterable[int]) -> dict[int, MessageView]:
        found: dict[int, MessageView] = {}
        with self._lock:
            for message_id in ids:
                held = self._views.get(message_id)
                if held is not None:
                    self._views.move_to_end(message_id)
                    found[message_id] = held[1]
        return found

    def put_many(self, conversation_id: int, views: Mapping[int, MessageView]) -> None:
        with self._lock:
            for message_id, view in views.items():
                self._views[message_id] = (conversation_id, view)
                self._views.move_to_end(message_id)
            while len(self._views) > self.capacity:
                self._views.popitem(last=False)

    def forget_conversations(self, conversation_ids: Iterable[int]) -> None:
        gone = set(conversation_ids)
        with self._lock:
            for message_id in [m for m, (c, _) in self._views.items() if c in gone]:
                del self._views[message_id]

    def __len__(self) -> int:
        return len(self._views)

"""A process's newest context window per conversation, kept while the context stands.

Assembly reads the same window turn after turn: the newest context items a
budget reaches, with their messages and summaries (``lcm.assembly``). Every
change to a conversation's context items, or to what one of them shows,
bumps ``conversations.context_version`` in the same transaction (ingest,
each compaction pass, a repair, surgery, a reset, an import). So a window
read at one version is the window for as long as the version stands, and is
kept here under a **stamp**: the version, the count of versions that were
appends, and the newest item's ordinal with the id of its message or
summary. The id is what makes the stamp safe across an erasure: on SQLite a
conversation's id can be given again once it is erased, and its version
starts again from zero, but a message id is never given twice (migration
0024) and a summary id is random, so a new conversation never shows an
erased one's stamp.

**Appends.** A gateway ingests, then assembles, every turn: each ingest
bumps the version, so the stamp alone would have the window read again every
turn. Ingest also bumps ``conversations.context_appends`` in the same
statement, and nothing else does (migration 0029): its new items take
ordinals past every item the context holds, and nothing else of it changes.
So while ``version - appends`` is unchanged, only appends happened since a
window was kept; if its newest item is still in the context at its ordinal
(the same message: this is what rules out a conversation erased and its id
given again), the window at the new stamp is the kept one followed by the
items after that ordinal, trimmed from the oldest end as the budget would
have read it (:func:`lcm.assembly.growth.grown`). Only those items are read.

The stamp is read in the reader's own transaction before the window is
looked up, so what is served is what that snapshot holds. A window read
from the database, or grown, is kept only if the stamp read again after it
is unchanged: under READ COMMITTED (Postgres outside a snapshot session) the
window's statements may see a later commit than the first stamp did, and a
newer window must never be kept under an older stamp. In a session that sees
one snapshot throughout (assembly's, marked :data:`ONE_SNAPSHOT`) the stamp
read again is the one read first, so it is not read again: two statements
less on every assembly that keeps what it read. ``POST …/assemble`` reads the
first stamp along with the conversation, in one statement
(``lcm.conversations.target_for_assembly``, :class:`StampRead`).

Entries are kept as read, before secret masking or the replay target's
filtering: both are applied per request on top. A window also keeps what was
computed from it (:class:`Memo`: the assembled context for a few settings),
which is as valid as the window itself (a grown window starts a new one).
Memory is bounded by the
number of entries kept across conversations (least recently used
conversation out first); a window larger than the whole capacity is not kept.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from lcm.context import ContextEntry

# Session.info key: the Database's window cache, handed to every session it opens.
WINDOW_CACHE = "lcm_window_cache"
# Session.info key: every statement of this session sees one snapshot
# (``Database.snapshot_session``), so a stamp read again in it cannot differ.
ONE_SNAPSHOT = "lcm_one_snapshot"


class Stamp(NamedTuple):
    """What a conversation's context was when a window was read (see the module docstring)."""

    version: int  # conversations.context_version
    appends: int  # conversations.context_appends: the versions that were ingest's appends
    ordinal: int  # the newest item's ordinal
    newest: int | str  # its message id, or its summary id

    def follows_appends_to(self, earlier: Stamp) -> bool:
        """Only appends changed the context since ``earlier``, if it is the same context.

        Whether it is (not a conversation erased and its id given again) is
        told by ``earlier``'s newest item: still in the context at its ordinal.
        """
        return (
            self.version > earlier.version
            and self.version - self.appends == earlier.version - earlier.appends
            and self.ordinal > earlier.ordinal
        )


class StampRead(NamedTuple):
    """A conversation's stamp as its reader read it, in its transaction, before the window.

    ``stamp`` is None when the context holds no item. Handed to assembly by a
    caller that read it along with the conversation (one statement less).
    """

    stamp: Stamp | None


class Memo:
    """A few values computed from one window, each under a key compared by ``==``.

    Keys need not be hashable (settings objects are not). At most
    ``MEMO_SIZE`` values, the oldest out first.
    """

    MEMO_SIZE = 2

    def __init__(self) -> None:
        self._held: list[tuple[object, object]] = []
        # Request threads share a window: one lock over a short list.
        self._lock = threading.Lock()

    def find(self, key: object) -> object | None:
        with self._lock:
            return next((value for k, value in self._held if k == key), None)

    def keep(self, key: object, value: object) -> None:
        with self._lock:
            self._held = [(k, v) for k, v in self._held if k != key][-(self.MEMO_SIZE - 1) :]
            self._held.append((key, value))


@dataclass(frozen=True, slots=True)
class CachedWindow:
    """The window one budget read: entries oldest first; ``whole``: no older item exists."""

    stamp: Stamp
    token_budget: int
    min_items: int
    entries: tuple[ContextEntry, ...]
    whole: bool
    memo: Memo = field(default_factory=Memo, compare=False)


class WindowCache:
    """At most ``capacity`` entries in windows, one window per conversation (LRU).

    Safe to share between threads: one lock over a few dict operations.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._held: OrderedDict[int, CachedWindow] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def get(
        self, conversation_id: int, stamp: Stamp, token_budget: int, min_items: int
    ) -> CachedWindow | None:
        """The conversation's window for this budget at ``stamp``, if held.

        Else the one held at an earlier stamp that only appends followed
        (:meth:`Stamp.follows_appends_to`): the caller grows it, or reads.
        """
        with self._lock:
            held = self._held.get(conversation_id)
            if held is None or not (held.stamp == stamp or stamp.follows_appends_to(held.stamp)):
                return None
            if held.token_budget != token_budget or held.min_items != min_items:
                return None
            self._held.move_to_end(conversation_id)
            return held

    def put(self, conversation_id: int, window: CachedWindow) -> None:
        """Keep ``window`` in place of the conversation's previous one."""
        if len(window.entries) > self.capacity:
            return
        with self._lock:
            previous = self._held.pop(conversation_id, None)
            if previous is not None:
                self._size -= len(previous.entries)
            self._held[conversation_id] = window
            self._size += len(window.entries)
            while self._size > self.capacity:
                _, gone = self._held.popitem(last=False)
                self._size -= len(gone.entries)

    def forget_conversations(self, conversation_ids: Iterable[int]) -> None:
        """Drop the windows of ``conversation_ids`` (their conversations were erased)."""
        with self._lock:
            for conversation_id in conversation_ids:
                gone = self._held.pop(conversation_id, None)
                if gone is not None:
                    self._size -= len(gone.entries)

    def __len__(self) -> int:
        """Entries held across every window."""
        return self._size

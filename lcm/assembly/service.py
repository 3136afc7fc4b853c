"""Assembling a conversation's next-turn context from the database (read-only).

The pure part (which entries fit the budget, the fresh tail, rendering and
normalizing to the provider's format) is :func:`lcm.assembly.assemble_context`;
this module reads only the entries that can matter from the database.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import NamedTuple, Protocol

from sqlalchemy.orm import Session

from lcm.assembly.assembler import AssembledContext, assemble_context
from lcm.assembly.growth import grown
from lcm.assembly.recall import RecalledSnippet
from lcm.assembly.replay import ReplayTarget, without_foreign_reasoning
from lcm.assembly.repository import AssemblyRepository, first_span
from lcm.context import ContextEntry
from lcm.context_store.repository import load_context, load_message_views, window_entries
from lcm.message_cache import MESSAGE_CACHE, MessageCache
from lcm.secrets import (
    conversation_has_erased,
    conversation_has_spans,
    mask_detected,
    mask_view,
    message_spans,
    stale_views,
)
from lcm.settings import CompactionSettings
from lcm.window_cache import (
    ONE_SNAPSHOT,
    WINDOW_CACHE,
    CachedWindow,
    Memo,
    Stamp,
    StampRead,
    WindowCache,
)


class PromptCue(Protocol):
    """What the prompt of an assemble call tells it (built by ``lcm.retrieval.prompt_cue``)."""

    @property
    def ranks(self) -> bool:
        """True when prompt-aware eviction applies: the setting is on, the prompt has terms."""
        ...

    def relevance(self, entries: Sequence[ContextEntry]) -> Mapping[int, float]:
        """Ordinal to relevance of the ``entries`` that match the prompt."""
        ...

    def recall(self, assembled: AssembledContext) -> Sequence[RecalledSnippet]:
        """Snippets of history the prompt names and ``assembled`` does not show."""
        ...


def assemble(
    session: Session,
    conversation_id: int,
    token_budget: int,
    settings: CompactionSettings,
    *,
    times: bool = False,
    replay_to: ReplayTarget = ReplayTarget(),
    cue: PromptCue | None = None,
    tenant_id: str | None = None,
    stamp_read: StampRead | None = None,
) -> AssembledContext:
    """The model context for the next turn of a conversation (read-only).

    Reads only the newest items that can fit the budget, widened back to the
    start of the latest user turn (the fresh tail never splits it). Should
    the fresh tail still fill the whole window, everything is read, so the
    tail is always complete. With ``times``, the result's ``message_spans``
    answers. With a ``cue`` that ranks and a budget that cannot hold every
    item, every item is read (an old one may be the relevant one) and the
    cue's relevance chooses; a cue's recalled snippets are added when they fit.
    Signed reasoning reaches only the model that wrote it when ``replay_to``
    names one (:mod:`lcm.assembly.replay`). Given the ``tenant_id``, the
    messages' detected secrets are masked unless ``assemble_secrets`` is
    ``pass`` (:func:`secret_masking`). ``stamp_read``: the context's stamp,
    read by the caller in ``session`` (not read again).
    """
    mask = secret_masking(session, tenant_id, conversation_id, settings)
    min_items = settings.fresh_tail_count + 1
    window = read_window(session, conversation_id, token_budget, min_items, stamp_read)
    if (cue is None or not cue.ranks) and mask is _as_stored and window.memo is not None:
        args = (window, window.memo, token_budget, settings, times, replay_to)
        return _memoized_recall(session, conversation_id, cue, *args)
    # A choice is forced when the items do not all fit (a whole window may
    # still not: it holds at least the fresh tail's count of items).
    forced = not window.whole or sum(e.token_count for e in window.entries) > token_budget
    if cue is None or not (cue.ranks and forced):
        entries, assembled = _from_window(
            session, conversation_id, window, token_budget, settings, times, replay_to, mask
        )
        relevance = None
    else:
        entries = mask(without_foreign_reasoning(load_context(session, conversation_id), replay_to))
        relevance = cue.relevance(entries)
        assembled = assemble_context(
            entries, token_budget, settings, times=times, relevance=relevance
        )
    if cue is None:
        return assembled
    recalled = cue.recall(assembled)
    if not recalled:
        return assembled
    if mask is not _as_stored:
        # A recalled sentence is cut from a message's content: what it shows is detected again.
        recalled = [replace(r, text=mask_detected(r.text)) for r in recalled]
    return assemble_context(
        entries, token_budget, settings, times=times, relevance=relevance, recalled=recalled
    )


def read_window(
    session: Session,
    conversation_id: int,
    token_budget: int,
    min_items: int,
    stamp_read: StampRead | None = None,
) -> WindowEntries:
    """The window's entries (``AssemblyRepository.window``), as stored (nothing masked).

    From the process's :class:`WindowCache` while the conversation's stamp
    (its context version and newest item) is the one they were read at, or
    grown from it by the items appended since, when only appends happened
    (the turn after an ingest); else read. A window read or grown is kept if
    the stamp read again after it is unchanged (a window newer than its
    stamp must not be kept: see ``lcm.window_cache``), which in a session
    seeing one snapshot it is without a read.
    """
    cache: WindowCache | None = session.info.get(WINDOW_CACHE)
    repo = AssemblyRepository(session)
    if cache is None:
        stamp = None
    else:  # read by the caller along with the conversation, or here
        stamp = repo.stamp(conversation_id) if stamp_read is None else stamp_read.stamp
    if cache is None or stamp is None:
        window = repo.window(conversation_id, token_budget, min_items)
        return WindowEntries(
            tuple(window_entries(session, conversation_id, window.items)), window.whole
        )
    held = cache.get(conversation_id, stamp, token_budget, min_items)
    if held is not None and held.stamp == stamp:
        return WindowEntries(held.entries, held.whole, stamp, held.memo)
    read = _grown(session, conversation_id, held, stamp) if held is not None else None
    if read is None:
        window = repo.window(conversation_id, token_budget, min_items)
        read = tuple(window_entries(session, conversation_id, window.items)), window.whole
    entries, whole = read
    if _stamp_holds(session, conversation_id, stamp):
        kept = CachedWindow(stamp, token_budget, min_items, entries, whole)
        cache.put(conversation_id, kept)
        return WindowEntries(entries, whole, stamp, kept.memo)
    return WindowEntries(entries, whole)


def _grown(
    session: Session, conversation_id: int, held: CachedWindow, stamp: Stamp
) -> tuple[tuple[ContextEntry, ...], bool] | None:
    """``held`` grown by the items appended after it, up to ``stamp``'s newest.

    None where the window is read instead: more items were appended than
    a read's first range covers (a read is then no dearer), or ``held``'s
    newest item is no longer in the context at its ordinal (not this
    context grown: ``lcm.window_cache``).
    """
    if stamp.ordinal - held.stamp.ordinal > first_span(held.token_budget, held.min_items):
        return None
    items = AssemblyRepository(session).appended(conversation_id, held.stamp, stamp.ordinal)
    if items is None:
        return None
    appended = window_entries(session, conversation_id, items)
    return grown(held.entries, held.whole, appended, held.token_budget, held.min_items)


class WindowEntries(NamedTuple):
    """The window's entries, oldest first; ``whole``: no older item exists.

    ``memo``: what is computed from a cached window at ``stamp`` may be kept there.
    """

    entries: tuple[ContextEntry, ...]
    whole: bool
    stamp: Stamp | None = None
    memo: Memo | None = None


def _memoized_recall(
    session: Session,
    conversation_id: int,
    cue: PromptCue | None,
    window: WindowEntries,
    memo: Memo,
    token_budget: int,
    settings: CompactionSettings,
    times: bool,
    replay_to: ReplayTarget,
) -> AssembledContext:
    """The memoized context, with what a cue that only recalls finds added to it.

    Such a cue mostly finds nothing (a name the window shows, nothing near
    enough in meaning): the memoized context then serves it as it is.
    """
    args = (window, memo, token_budget, settings, times, replay_to)
    memoized = _memoized(session, conversation_id, *args)
    recalled = cue.recall(memoized) if cue is not None else ()
    if not recalled:
        return memoized
    entries, _ = _from_window(
        session, conversation_id, window, token_budget, settings, times, replay_to, _as_stored
    )
    return assemble_context(entries, token_budget, settings, times=times, recalled=recalled)


def _memoized(
    session: Session,
    conversation_id: int,
    window: WindowEntries,
    memo: Memo,
    token_budget: int,
    settings: CompactionSettings,
    times: bool,
    replay_to: ReplayTarget,
) -> AssembledContext:
    """The assembled context of a cached window (``memo`` is its), once per settings.

    Only for an assembly that depends on nothing else: no prompt and no
    secret to mask. Kept only if the stamp still holds after it (at READ
    COMMITTED a read past the window may see a later commit than the window).
    """
    key = (token_budget, times, replay_to, settings)
    held = memo.find(key)
    if isinstance(held, AssembledContext):
        return held
    _, assembled = _from_window(
        session, conversation_id, window, token_budget, settings, times, replay_to, _as_stored
    )
    if window.stamp is not None and _stamp_holds(session, conversation_id, window.stamp):
        memo.keep(key, assembled)
    return assembled


def _stamp_holds(session: Session, conversation_id: int, stamp: Stamp) -> bool:
    """The conversation's stamp is still ``stamp`` (what was read since may be kept under it).

    In a session seeing one snapshot it cannot have changed: not read again.
    """
    if session.info.get(ONE_SNAPSHOT):
        return True
    return AssemblyRepository(session).stamp(conversation_id) == stamp


def _from_window(
    session: Session,
    conversation_id: int,
    window: WindowEntries,
    token_budget: int,
    settings: CompactionSettings,
    times: bool,
    replay_to: ReplayTarget,
    mask: Masking,
) -> tuple[Sequence[ContextEntry], AssembledContext]:
    """Assembled from the window, read further back only when the tail needs it."""
    if not window.entries:
        return [], assemble_context([], token_budget, settings, times=times)
    start = window.entries[0].ordinal
    entries = mask(without_foreign_reasoning(window.entries, replay_to))
    if window.whole:
        return entries, assemble_context(entries, token_budget, settings, times=times)
    if not any(_bounds_the_tail(e) for e in entries):
        # Raw messages all the way and no turn start in sight: the turn, and
        # so the tail, began before the window. Rare: one agent loop longer
        # than the whole budget.
        turn = AssemblyRepository(session).latest_turn_start(conversation_id, before=start)
        if turn is not None:
            entries = mask(
                without_foreign_reasoning(
                    load_context(session, conversation_id, from_ordinal=turn), replay_to
                )
            )
    assembled = assemble_context(entries, token_budget, settings, times=times)
    if assembled.fresh_tail_count == len(entries):
        # The whole window is fresh tail: it may go on before the window.
        everything = mask(
            without_foreign_reasoning(load_context(session, conversation_id), replay_to)
        )
        return everything, assemble_context(everything, token_budget, settings, times=times)
    return entries, assembled


def _bounds_the_tail(entry: ContextEntry) -> bool:
    """A summary or a turn-starting user message: the fresh tail cannot reach past it."""
    return entry.message is None or entry.message.starts_user_turn


Masking = Callable[[Sequence[ContextEntry]], Sequence[ContextEntry]]


def _as_stored(entries: Sequence[ContextEntry]) -> Sequence[ContextEntry]:
    return entries


def secret_masking(
    session: Session, tenant_id: str | None, conversation_id: int, settings: CompactionSettings
) -> Masking:
    """What assembly applies to the entries it reads: their messages' secrets masked.

    The entries are never changed (their views are shared through the
    message cache): a message with spans is replaced by a masked copy. A
    conversation without any span costs one indexed probe and nothing else.
    """
    if tenant_id is None:
        return _as_stored
    if not settings.masks_secrets("assemble"):
        # Sent as stored; but a view cached before an erasure holds the original.
        if not conversation_has_erased(session, tenant_id, conversation_id):
            return _as_stored
        return lambda entries: _refreshed_stale(session, tenant_id, conversation_id, entries)
    if not conversation_has_spans(session, tenant_id, conversation_id):
        return _as_stored

    def masked(entries: Sequence[ContextEntry]) -> Sequence[ContextEntry]:
        views = [e.message for e in entries if e.message is not None]
        spans = message_spans(session, tenant_id, [v.id for v in views])
        if not spans:
            return entries
        entries = _refreshed(session, conversation_id, entries, stale_views(views, spans))
        return [
            replace(e, message=mask_view(e.message, spans[e.message.id]))
            if e.message is not None and e.message.id in spans
            else e
            for e in entries
        ]

    return masked


def _refreshed_stale(
    session: Session, tenant_id: str, conversation_id: int, entries: Sequence[ContextEntry]
) -> Sequence[ContextEntry]:
    views = [e.message for e in entries if e.message is not None]
    spans = message_spans(session, tenant_id, [v.id for v in views])
    return _refreshed(session, conversation_id, entries, stale_views(views, spans))


def _refreshed(
    session: Session, conversation_id: int, entries: Sequence[ContextEntry], stale: list[int]
) -> Sequence[ContextEntry]:
    """``entries`` with the messages in ``stale`` read again (and cached again).

    A message whose secret was erased after this process cached its view
    (``lcm.secrets.stale_views``): the cache would serve the original text.
    """
    if not stale:
        return entries
    fresh = load_message_views(session, stale)
    cache: MessageCache | None = session.info.get(MESSAGE_CACHE)
    if cache is not None:
        cache.put_many(conversation_id, fresh)
    return [
        replace(e, message=fresh[e.message.id])
        if e.message is not None and e.message.id in fresh
        else e
        for e in entries
    ]

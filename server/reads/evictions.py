"""Evictions asked for by name (the Evict RPC, `pomoview evict`): some keys of a view, every
key of a view, or every key of every partial state.

The memory budget evicts on its own (memory_budget.py, dataflow/state/eviction.py); this is
the operator's lever: drop what a view holds for some keys, or everything, and have the next
lookups fetch it again, with the same answers. It changes no answer and loses nothing
acknowledged: partial state is a cache of the sources, and writes that meet an evicted key
are dropped there as at any missing key.

What it never evicts: a full state (a full reader answers a key it does not hold as empty,
so dropping one would change answers), a key a subscription pins, and (for every key of
every state) a key whose eviction would reach a pinned key below. Keys of a view are evicted
at its readers only: the states above keep theirs, which other views may read; evicting
everything takes them too. A recursive view's keys leave their demand as the budget's
evictions do (`Graph.release_demand`). Then the process gives the freed memory back to the OS
(`give_back_memory`), outside the lock.

Evicting everything takes the dataflow lock a slice of keys at a time (`SLICE_KEYS`), so that
lookups and the apply, which wait on that lock, go on between slices; held for the whole of
it, 200,000 keys of the vote program (100,000 articles) held it 1.1 s. Keys looked up while
it runs may be present again when it returns, as they may be right after any eviction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from pomoview.dataflow.state.keyed_state import Key
from pomoview.server.errors import InvalidArgument
from pomoview.server.reads.lookups import view_relation
from pomoview.server.typed_rows import Rows, typed_keys
from pomoview.server.views.memory_budget import give_back_memory
from pomoview.server.views.view_state import ViewState


@dataclass(frozen=True)
class Eviction:
    keys: int  # keys evicted where they were taken (more may have gone below)
    pinned: int  # keys of the readers asked that a subscription pins, left present
    estimated_bytes: int  # what the partial states' estimate fell by
    epoch: int  # the applied epoch when it ran


# The keys asked for: their attributes (in the view's order) and their values.
Asked = tuple[tuple[str, ...], list[Key]]

# Keys evicted per hold of the dataflow lock when evicting everything: about 25 ms of it for
# the vote program's states (5.3 us a key taken, with what goes below it), against 1.1 s for
# 200,000 keys at once.
SLICE_KEYS = 5_000


def evict(state: ViewState, view: str | None, keys: Rows | None, slice_keys: int = SLICE_KEYS) -> Eviction:
    """Evicts `keys` of `view` (None: every key of the view), or, with no view, every key of
    every partial state (`slice_keys` at a time); raises NotFound for an unknown view and
    InvalidArgument for keys that do not fit it."""
    program = state.require_program()
    asked: Asked | None = None
    if view is None and keys:
        raise InvalidArgument("keys to evict need the view they belong to")
    if view is None:
        done = _evict_everything(state, slice_keys)
    else:
        relation = view_relation(program, view)
        if keys:
            key_attrs, typed = typed_keys(relation, view, keys)
            asked = key_attrs, cast(list[Key], typed)  # a Value is a Key's object
        with state.lock:
            done = _evict_locked(state, view, asked)
    if done.keys:
        give_back_memory()
    return done


def _evict_everything(state: ViewState, slice_keys: int) -> Eviction:
    """Every unpinned key of every partial state, a slice at a time under the dataflow lock.
    It stops when a slice leaves nothing, when the graph was replaced between slices (a new
    graph holds only what was looked up since), or once it has evicted twice the keys present
    at its start: lookups filling keys as fast as it evicts them would otherwise keep it
    going."""
    evicted = freed = pinned = bound = 0
    epoch = state.applied_epoch
    holder: object | None = None  # the graph of the first slice
    while True:
        with state.lock:
            current = state.graph
            if current is None or (holder is not None and current is not holder):
                break
            graph = current.graph
            if holder is None:
                holder = current
                bound = 2 * sum(s.present_keys() for n in graph.nodes if (s := n.eviction_state()))
            done = graph.evict_everything(max_keys=slice_keys)
            evicted, freed = evicted + done.keys, freed + done.estimated_bytes
            pinned = sum(len(r.state.pinned) for r in graph.readers.values() if r.partial)
            epoch = state.applied_epoch
        if done.done or evicted >= bound:
            break
    return Eviction(evicted, pinned, freed, epoch)


def _evict_locked(state: ViewState, view: str, asked: Asked | None) -> Eviction:
    """`evict` of a view's keys under the dataflow lock, the keys checked."""
    holder = state.graph
    if holder is None:
        return Eviction(0, 0, 0, state.applied_epoch)
    graph = holder.graph
    # A reader not built yet holds nothing (a program installed since holds other ones).
    if asked is not None:
        names = [(view, asked[0])] if (view, asked[0]) in graph.readers else []
    else:
        names = [name for name in graph.readers if name[0] == view]
    evicted = pinned = freed = 0
    for name in names:
        done, left = graph.evict_reader_keys(name, None if asked is None else asked[1])
        evicted, pinned, freed = evicted + done.keys, pinned + left, freed + done.estimated_bytes
    return Eviction(evicted, pinned, freed, state.applied_epoch)

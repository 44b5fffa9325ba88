"""Eviction under a memory budget: which keys go, and from where (DESIGN §3, Noria §5).

`evict(nodes, need)` frees about `need` bytes of partial state, as the states estimate their
own size: it takes the largest evictable state (ReadySet's choice of *where*), evicts its
least recently used keys (`KeyedState.sweep`, second chance), enough of them for what is
left to free at that state's bytes per key (at most an eighth of its keys at a time), and
goes on until enough is freed or nothing is left to evict. Each eviction goes below the
state too (`Node.evict_own`), so every state derived from an evicted key loses it as well
(Noria invariant 4). *When* to evict is the
caller's decision, from real memory (server/memory_budget.py).

A full state is never evicted: `eviction_state()` is None for it. Nor is a key a
subscription pins (`KeyedState.pinned`, at a reader): `sweep` passes it by. A state above a
reader that holds pins (`shielded`) gives up only the swept keys whose eviction would not
reach a pinned key below (`Node.own_eviction_reaches_pinned`, which follows the eviction's
path without changing anything): an eviction above reaches every key below derived from the
evicted ones, and with states keyed by other columns in between that can be any key of the
reader. The others stay, moved behind the rest (`KeyedState.pass_over`). Shielding every
state above whole, as before, left only the reader evictable under an open subscription:
the states above grew without bound while each round emptied the reader of every key
(measured in the mixed-load test: RSS +25 MiB a minute, hot reads missing).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from pomoview.dataflow.node import Node
from pomoview.dataflow.state.keyed_state import Key

# One sweep takes at least this share of a state's keys, so a state whose estimate is off
# still shrinks in a few steps.
_MIN_SHARE = 0.01
_MAX_STEP_SHARE = 8
# Per-key probes of a shielded state's victims, when none has passed yet, before giving up.
_PROBES = 4


@dataclass
class Evicted:
    keys: int = 0  # keys evicted where the sweep took them (more go below)
    estimated_bytes: int = 0  # what the states' estimates fell by, below included
    steps: int = 0
    done: bool = True  # `evict_all`: False when it stopped at its `max_keys` with keys left


def partial_state_bytes(nodes: Sequence[Node]) -> int:
    """The estimated bytes of every partial state."""
    total = 0
    for node in nodes:
        summary = node.state_summary()
        if summary is not None and summary.partial:
            total += summary.bytes
    return total


def shielded(nodes: Sequence[Node]) -> set[int]:
    """id() of every node above a state that holds pinned keys: evicting there could make a
    pinned key missing below."""
    out: set[int] = set()
    stack = [
        parent
        for n in nodes
        if (state := n.eviction_state()) is not None and state.pinned
        for parent in n.inputs
    ]
    while stack:
        node = stack.pop()
        if id(node) not in out:
            out.add(id(node))
            stack.extend(node.inputs)
    return out


def _unpinned(node: Node, victims: list[Key]) -> list[Key]:
    """The `victims` of `node` whose eviction reaches no pinned key below; the others are
    passed over. One probe for all of them first, the common case; then one per key, given
    up after a few when none passes (a state whose every eviction reaches every key below)."""
    if not victims or not node.own_eviction_reaches_pinned(victims):
        return victims
    free: list[Key] = []
    kept: list[Key] = []
    for i, key in enumerate(victims):
        if i >= _PROBES and not free:
            kept += victims[i:]
            break
        (kept if node.own_eviction_reaches_pinned([key]) else free).append(key)
    state = node.eviction_state()
    assert state is not None
    state.pass_over(kept)
    return free


def evict(nodes: Sequence[Node], need: int, *, max_steps: int = 256) -> Evicted:
    out = Evicted()
    held = shielded(nodes)
    sizes = {id(n): _bytes(n) for n in nodes if n.eviction_state() is not None}
    spent: set[int] = set()  # shielded states whose last sweep found nothing free to evict
    while out.estimated_bytes < need and out.steps < max_steps:
        candidates = [
            n for n in nodes
            if sizes.get(id(n), 0) > 0
            and id(n) not in spent
            and (state := n.eviction_state()) is not None
            and state.evictable_keys()
        ]
        if not candidates:
            break
        node = max(candidates, key=lambda n: sizes[id(n)])
        state = node.eviction_state()
        assert state is not None
        present = state.evictable_keys()
        per_key = max(1, sizes[id(node)] // max(1, present))
        # What is left to free at this state's bytes per key, but at most an eighth of its
        # keys a step: an evicted key frees state below it too, which its own size omits.
        count = max(1, int(present * _MIN_SHARE), -(-(need - out.estimated_bytes) // per_key))
        count = min(count, max(1, present // _MAX_STEP_SHARE))
        before = sum(sizes.values())
        victims = state.sweep(count)
        if id(node) in held:
            victims = _unpinned(node, victims)
            if not victims:
                spent.add(id(node))
        out.keys += node.evict_own(victims)
        sizes = {id(n): _bytes(n) for n in nodes if n.eviction_state() is not None}
        out.estimated_bytes += max(0, before - sum(sizes.values()))
        out.steps += 1
    return out


def evict_all(nodes: Sequence[Node], max_keys: int | None = None) -> Evicted:
    """Evicts every key of every partial state, but a key a subscription pins and a key whose
    eviction would reach a pinned key below (an eviction asked for by name: the server's
    Evict). Passes over the states until one evicts nothing, since an eviction above takes
    the keys derived from it below too; unlike `evict`, it tests each key of a shielded
    state whose victims reach a pin, never giving up after a few probes.

    With `max_keys`, it stops once it has taken that many keys (`done` False if any is
    left): a slice, after which the caller may release its lock (lookups and the apply wait
    on it) and call again. Each slice leaves the states consistent, as any eviction does."""
    assert max_keys is None or max_keys > 0, "a slice takes at least one key"
    out = Evicted()
    before = partial_state_bytes(nodes)
    while out.done:
        held = shielded(nodes)
        evicted = 0
        for node in nodes:
            state = node.eviction_state()
            if state is None:
                continue
            room = None if max_keys is None else max_keys - out.keys - evicted
            unpinned = (k for k in state.keys() if k not in state.pinned)
            if id(node) in held:
                victims = list(unpinned)
                if victims and node.own_eviction_reaches_pinned(victims):
                    victims = [k for k in victims if not node.own_eviction_reaches_pinned([k])]
            else:  # a slice lists no more keys than it takes (one past: are any left?)
                victims = list(itertools.islice(unpinned, None if room is None else room + 1))
            if room is not None and len(victims) > room:
                victims = victims[:room]
                out.done = False  # keys left for the next slice
            if victims:
                evicted += node.evict_own(victims)
                out.steps += 1
            if not out.done:
                break
        out.keys += evicted
        if not evicted:
            break
    out.estimated_bytes = max(0, before - partial_state_bytes(nodes))
    return out


def _bytes(node: Node) -> int:
    summary = node.state_summary()
    return 0 if summary is None else summary.bytes

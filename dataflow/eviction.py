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
subscription pins (`KeyedState.pinned`, at a reader): `sweep` passes it by, and no state
above a reader that holds pins is evicted at all (`shielded`), since an eviction above
reaches, through the states between, every key below derived from the evicted ones, and
with states keyed by other columns in between that can be any key of the reader.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .node import Node

# One sweep takes at least this share of a state's keys, so a state whose estimate is off
# still shrinks in a few steps.
_MIN_SHARE = 0.01
_MAX_STEP_SHARE = 8


@dataclass
class Evicted:
    keys: int = 0  # keys evicted where the sweep took them (more go below)
    estimated_bytes: int = 0  # what the states' estimates fell by, below included
    steps: int = 0


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


def evict(nodes: Sequence[Node], need: int, *, max_steps: int = 256) -> Evicted:
    out = Evicted()
    held = shielded(nodes)
    sizes = {
        id(n): _bytes(n) for n in nodes if n.eviction_state() is not None and id(n) not in held
    }
    while out.estimated_bytes < need and out.steps < max_steps:
        candidates = [
            n for n in nodes
            if sizes.get(id(n), 0) > 0
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
        out.keys += node.evict_own(state.sweep(count))
        sizes = {id(n): _bytes(n) for n in nodes if n.eviction_state() is not None and id(n) not in held}
        out.estimated_bytes += max(0, before - sum(sizes.values()))
        out.steps += 1
    return out


def _bytes(node: Node) -> int:
    summary = node.state_summary()
    return 0 if summary is None else summary.bytes

"""DemandGate: a reader's door to a relation computed only for demanded keys (magic sets).

The planner's demand transformation (planner/demand/magic.py) rewrites a view looked up by
key K into a copy whose rules are guarded by a demand source: the copy holds the rows of
the demanded keys and of nothing else. Its states above are full (hydrated at build, empty
while nothing is demanded) and the recursion among them is maintained incrementally, so
demand is data: a key entering the demand source is an insertion that the recursion
derives the key's rows from, and a key leaving it a deletion that retracts them.

Contract:
- Input: the demanded relation's delta. Output: the same delta (linear, stateless).
- State: `demanded`, the keys in the demand source, each once. Invariant (`check`): every
  key present in a state below is demanded, so no key below is ever read without its rows.
- Missing key: an upquery for keys not demanded yet first inserts them into the demand
  source with `push` (a step of the graph, under the caller's lock, between two epochs: it
  changes no epoch's answers, only which keys the states above hold), then reads the states
  above, which hold them now. It never fetches and never misses. During a step (a TopK's
  refill, `fetches_allowed()` false) every key asked is demanded already: a key present
  below is demanded.
- Eviction: the state below evicts its keys on its own; `release` then retracts the demand
  of every key no state below holds (one step deleting them), so the states above shrink.
  The states above are full, so no eviction ever reaches the gate from above.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from pomoview.dataflow.node import KeyedNode, Node
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.upquery import Upquery, fetches_allowed, rows
from pomoview.dataflow.zset import ZSet

# Steps the graph with this delta of the demand source (weights +1 insert, -1 delete).
Push = Callable[[ZSet[Row]], None]


class DemandGate(Node):
    def __init__(self, parent: Node, key_cols: tuple[int, ...], demand: str, push: Push) -> None:
        super().__init__(parent.schema, (parent,))
        self.key_cols = key_cols
        self.demand = demand  # the demand source's name, for describe
        self.push = push
        self.demanded: set[Key] = set()
        self.released = 0  # keys whose demand was retracted

    def on_delta(self, port: int, delta: ZSet[Row]) -> ZSet[Row]:
        return delta

    def upquery(self, cols: tuple[int, ...], keys: Collection[Key]) -> Upquery[ZSet[Row]]:
        assert cols == self.key_cols, f"{self.describe()}: query on {cols}"
        new = [k for k in dict.fromkeys(keys) if k not in self.demanded]
        if new:
            assert fetches_allowed(), f"{self.describe()}: new demand {new[:3]} inside a step"
            self.demanded.update(new)
            self.metrics.filled_keys += len(new)
            self.push(ZSet([(key, 1) for key in new]))
        return (yield rows(self.inputs[0], cols, keys))

    def release(self) -> int:
        """Retracts the demand of the keys no state below holds; returns how many."""
        below = [c for c, _ in self.consumers if isinstance(c, KeyedNode)]
        gone = [k for k in self.demanded if not any(c.state.is_present(k) for c in below)]
        if gone:
            self.demanded.difference_update(gone)
            self.released += len(gone)
            self.push(ZSet([(key, -1) for key in gone]))
        return len(gone)

    def check(self) -> None:
        for consumer, _ in self.consumers:
            if isinstance(consumer, KeyedNode):
                for key in consumer.state.keys():
                    assert key in self.demanded, f"{self.describe()}: {key!r} is present below, not demanded"

    def describe(self) -> str:
        keys = tuple(self.schema[c] for c in self.key_cols)
        return f"DemandGate({self.demand} by {keys}, {len(self.demanded)} demanded, {self.released} released)"

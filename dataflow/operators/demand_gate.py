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
  changes no epoch's answers, only which keys the states above hold). When the relation
  reads sources through slices (`slices`, its other inputs: source_slice.py), it then fills
  them until nothing they need is unmet: each round fetches every newly needed key of a
  slice at once, and misses (a Miss, the walk resumes here) while that fetch is not at
  hand. Then it reads the states above, which hold the keys' rows now. Keys being filled
  are counted in `filling`, so that an eviction between rounds does not release them.
  During a step (a TopK's refill, `fetches_allowed()` false) every key asked is demanded
  and settled already: a key present below is.
- A write that makes a slice need keys it has not fetched evicts the keys below and keeps
  their demand (`evict_settled`): the next lookup fetches what is lacking and reads. Keys
  a subscription pins stay; the server fills for them after the step (`settle_step`).
- Eviction: the state below evicts its keys on its own; `release` then retracts the demand
  of every key no state below holds and no fill holds (one step deleting them), and the
  slices drop the rows no longer needed, so the states above shrink. The states above are
  full, so no eviction ever reaches the gate from above.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Sequence

from pomoview.dataflow.node import KeyedNode, Node
from pomoview.dataflow.operators.source_slice import SourceSlice
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.upquery import Ask, Upquery, all_cover, ask_all, covered, fetches_allowed, rows
from pomoview.dataflow.zset import ZSet

# Steps the graph with this delta of the demand source (weights +1 insert, -1 delete).
Push = Callable[[ZSet[Row]], None]


class DemandGate(Node):
    def __init__(
        self,
        parent: Node,
        key_cols: tuple[int, ...],
        demand: str,
        push: Push,
        slices: Sequence[SourceSlice] = (),
        whole: Sequence[str] = (),
    ) -> None:
        # The slices are inputs so that the circuit builds and steps them with the gate;
        # they carry no rows.
        super().__init__(parent.schema, (parent, *slices))
        self.key_cols = key_cols
        self.demand = demand  # the demand source's name, for describe
        self.push = push
        self.slices = tuple(slices)
        self.whole = tuple(whole)  # the base sources the relation reads whole, for describe
        for piece in self.slices:
            piece.gates.append(self)
        self.demanded: set[Key] = set()
        self.filling: Counter[Key] = Counter()  # keys whose upquery is between rounds
        self.released = 0  # keys whose demand was retracted

    def on_delta(self, port: int, delta: ZSet[Row]) -> ZSet[Row]:
        return delta if port == 0 else ZSet()

    def upquery(self, cols: tuple[int, ...], keys: Collection[Key]) -> Upquery[ZSet[Row]]:
        assert cols == self.key_cols, f"{self.describe()}: query on {cols}"
        asked = list(dict.fromkeys(keys))
        self.filling.update(asked)
        try:
            new = [k for k in asked if k not in self.demanded]
            if new:
                assert fetches_allowed(), f"{self.describe()}: new demand {new[:3]} inside a step"
                self.demanded.update(new)
                self.metrics.filled_keys += len(new)
                self.push(ZSet([(key, 1) for key in new]))
            yield from self.settle_step()
            answer: ZSet[Row] = yield rows(self.inputs[0], cols, keys)
            return answer
        finally:
            self.filling.subtract(asked)
            self.filling = +self.filling  # drops the keys no fill holds any more

    def settle_step(self) -> Upquery[None]:
        """Fills the slices until nothing they need is unmet, one round per level of newly
        needed keys. A lookup's upquery runs it before it reads; the server runs it alone
        after a step that left keys pinned below unsettled (`evict_settled`), so that their
        subscriptions get the rows the write reached without waiting for a lookup."""
        while True:
            unmet = [piece for piece in self.slices if piece.unmet]
            if not unmet:
                return
            yield from ask_all([Ask(piece.fill_step, ()) for piece in unmet])

    def covers_step(self, cols: tuple[int, ...], key: Key) -> Upquery[bool]:
        return all_cover([covered(self.inputs[0], cols, key)])

    def release(self) -> int:
        """Retracts the demand of the keys no state below and no fill holds, then the slices'
        rows no longer needed; returns how many keys it retracted."""
        below = [c for c, _ in self.consumers if isinstance(c, KeyedNode)]
        gone = [
            k
            for k in self.demanded
            if k not in self.filling and not any(c.state.is_present(k) for c in below)
        ]
        if gone:
            self.demanded.difference_update(gone)
            self.released += len(gone)
            self.push(ZSet([(key, -1) for key in gone]))
            for piece in self.slices:
                piece.trim()
        return len(gone)

    def evict_settled(self) -> tuple[int, int]:
        """Evicts every key present below (not those a fill holds, which are not present
        yet): what a write does when it makes a slice need keys it has not fetched
        (Graph.step), since those keys' answers would miss rows until fetched. Returns how
        many keys it evicted, and how many it left because a subscription pins them.

        Their demand stays: the states above go on maintaining their rows, and the next
        lookup of one finds it demanded, fetches what the slices lack (`upquery`'s fill
        loop) and reads it, one round per new level of keys. Retracting the demand here
        made that lookup derive the key's whole answer again, and the retraction cost as
        much (bench/recursive_lookup.py: an insert was visible after 2 s at the median and
        210 s at p99). A budget eviction (`release`) retracts them, as no state below
        holds them."""
        evicted = pinned = 0
        for consumer, _ in self.consumers:
            if isinstance(consumer, KeyedNode):
                # A key a subscription pins stays (eviction.py never takes one): its answer
                # lacks the rows until the next fill through this gate, which the server
                # runs right after the step (`settle_step`).
                state = consumer.state
                keys = list(state.keys())
                pinned += sum(1 for k in keys if k in state.pinned)
                evicted += consumer.evict_own([k for k in keys if k not in state.pinned])
        return evicted, pinned

    def check(self) -> None:
        for piece in self.slices:
            piece.check()
        for consumer, _ in self.consumers:
            if isinstance(consumer, KeyedNode):
                for key in consumer.state.keys():
                    assert key in self.demanded, f"{self.describe()}: {key!r} is present below, not demanded"

    def describe(self) -> str:
        keys = tuple(self.schema[c] for c in self.key_cols)
        reads = [f"{piece.source} by slice" for piece in self.slices] + [f"{s} whole" for s in self.whole]
        what = f", reads {' and '.join(reads)}" if reads else ""
        counts = f"{len(self.demanded)} demanded, {self.released} released"
        return f"DemandGate({self.demand} by {keys}{what}, {counts})"

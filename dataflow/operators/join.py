"""Join: the incremental natural join of two streams on shared columns (PomoFlow §2.9.13).

Contract:
- Output row: the left row followed by the right row's non-key columns;
  weight: the product of the two weights.
- Bilinear: for deltas dL, dR in one step, d(L⋈R) = dL⋈R + L'⋈dR, where L' already
  includes dL. The node applies port 0 before port 1, which gives exactly that.
- State: both inputs, each indexed by the join key (the "join input" states).
- Partial mode (the downstream key is the join key): both sides are filled
  together for a key, so a key is present on both sides or on neither. A
  delta whose key is missing is dropped; an upquery asks both inputs for the
  missing join keys (both sides hold the key, so neither answer duplicates
  the other).
- Full mode: both sides hydrated from their inputs; upqueries on any columns
  are answered by scanning.
- An upquery that raises (an input cannot answer yet) leaves the join unchanged.
"""

from __future__ import annotations

from ..keyed_pair import KeyedPair
from ..keyed_state import Key, Row
from ..node import Node, project
from ..zset import ZSet


class Join(KeyedPair):
    def __init__(
        self,
        left: Node,
        right: Node,
        left_keys: tuple[int, ...],
        right_keys: tuple[int, ...],
        *,
        partial: bool,
    ) -> None:
        self.right_rest = tuple(i for i in range(len(right.schema)) if i not in right_keys)
        schema = left.schema + tuple(right.schema[i] for i in self.right_rest)
        super().__init__(schema, left, right, left_keys, right_keys, partial=partial)

    def _combine(self, left: Row, right: Row) -> Row:
        return left + tuple(right[i] for i in self.right_rest)

    def on_delta(self, port: int, delta: ZSet[Row]) -> ZSet[Row]:
        own, other = self.sides[port], self.sides[1 - port]
        key_cols = self.left_keys if port == 0 else self.right_keys
        out: ZSet[Row] = ZSet()
        for row, weight in delta.items():
            key = project(row, key_cols)
            if not own.is_present(key):
                self.metrics.dropped += 1
                continue
            matches = other.get(key)
            assert matches is not None, "join sides are filled together"
            for match, match_weight in matches.items():
                joined = self._combine(row, match) if port == 0 else self._combine(match, row)
                out.add(joined, weight * match_weight)
            own.add(key, row, weight)
        return out

    def _output(self, key: Key) -> ZSet[Row]:
        out: ZSet[Row] = ZSet()
        lefts, rights = self.sides[0].get(key) or {}, self.sides[1].get(key) or {}
        for left, lw in lefts.items():
            for right, rw in rights.items():
                out.add(self._combine(left, right), lw * rw)
        return out

    def describe(self) -> str:
        keys = tuple(self.inputs[0].schema[i] for i in self.left_keys)
        return f"Join(on {keys}, {'partial' if self.partial else 'full'})"

"""Join: the incremental natural join of two streams on shared columns (PomoFlow §2.9.13).

Contract:
- Output row: the left row followed by the right row's non-key columns;
  weight: the product of the two weights.
- Bilinear: for deltas dL, dR in one step, d(L⋈R) = dL⋈R + L'⋈dR, where L' already
  includes dL. The node applies port 0 before port 1, which gives exactly that.
- State (keyed_pair.py): the keyed side's rows by the key the node below upqueries by,
  with an index of them by the join columns, and the other side's rows by the join columns.
- Partial mode (the downstream key traces to the columns of one input, `keyed_side`):
  an upquery asks that input for the keys, then the other input for the join keys it
  lacks (a dependent upquery), and fills both at once. A delta whose key is missing is
  dropped; a keyed-side delta whose join key is missing on the other side evicts its key
  here and below (join eviction); an other-side delta for a present join key meets the
  present keyed rows of that join key.
- Full mode: both sides hydrated from their inputs; upqueries by the join columns read
  the state, any other upquery scans.
- An upquery whose inputs miss (a fetch not at hand) leaves the join unchanged until
  they answer: both sides fill in one round.
"""

from __future__ import annotations

from pomoview.dataflow.node import Node
from pomoview.dataflow.state.keyed_pair import KeyedPairOfRows
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.zset import ZSet


class Join(KeyedPairOfRows):
    def __init__(
        self,
        left: Node,
        right: Node,
        left_keys: tuple[int, ...],
        right_keys: tuple[int, ...],
        *,
        partial: bool,
        keyed_side: int = 0,
        side_key: tuple[int, ...] | None = None,
        other_partial: bool | None = None,
    ) -> None:
        self.right_rest = tuple(i for i in range(len(right.schema)) if i not in right_keys)
        schema = left.schema + tuple(right.schema[i] for i in self.right_rest)
        super().__init__(
            schema,
            left,
            right,
            left_keys,
            right_keys,
            partial=partial,
            keyed_side=keyed_side,
            side_key=side_key,
            other_partial=other_partial,
        )
        self._left_width = len(left.schema)

    def _combine(self, left: Row, right: Row) -> Row:
        return left + tuple(right[i] for i in self.right_rest)

    def _output_sources(self, col: int) -> dict[int, int]:
        if col < self._left_width:
            found = {0: col}
            if col in self.left_keys:
                found[1] = self.right_keys[self.left_keys.index(col)]
            return found
        return {1: self.right_rest[col - self._left_width]}

    def _emit(self, row: Row, weight: int, j: Key, out: ZSet[Row]) -> None:
        matches = self.other.get(j)
        assert matches is not None, "a present keyed row has its join key present on the other side"
        for match, match_weight in matches.items():
            joined = self._combine(row, match) if self.keyed_side == 0 else self._combine(match, row)
            out.add(joined, weight * match_weight)

    def _other_delta(self, j: Key, changes: list[tuple[Row, int]], out: ZSet[Row]) -> None:
        keyed_rows = self.by_join.get(j) or {}
        for row, weight in changes:
            for match, match_weight in keyed_rows.items():
                joined = self._combine(match, row) if self.keyed_side == 0 else self._combine(row, match)
                out.add(joined, weight * match_weight)
            self.other.add(j, row, weight)

    def describe(self) -> str:
        keys = tuple(self.inputs[0].schema[i] for i in self.left_keys)
        if not self.partial:
            return f"Join(on {keys}, full)"
        side = self.inputs[self.keyed_side]
        by = tuple(side.schema[i] for i in self.side_key)
        return f"Join(on {keys}, partial by {'left' if self.keyed_side == 0 else 'right'} {by})"

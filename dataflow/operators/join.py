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

from collections.abc import Collection

from ..keyed_state import Key, KeyedState, Row
from ..node import Node, group_by_key, project, select_keys
from ..zset import ZSet


class Join(Node):
    stateful = True

    def __init__(
        self,
        left: Node,
        right: Node,
        left_keys: tuple[int, ...],
        right_keys: tuple[int, ...],
        *,
        partial: bool,
    ) -> None:
        assert len(left_keys) == len(right_keys)
        self.right_rest = tuple(i for i in range(len(right.schema)) if i not in right_keys)
        schema = left.schema + tuple(right.schema[i] for i in self.right_rest)
        super().__init__(schema, (left, right))
        self.left_keys = left_keys
        self.right_keys = right_keys
        self.sides = (KeyedState(partial=partial), KeyedState(partial=partial))

    @property
    def partial(self) -> bool:
        return self.sides[0].partial

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

    def hydrate(self) -> None:
        if self.partial:
            return
        for side, node, cols in (
            (0, self.inputs[0], self.left_keys),
            (1, self.inputs[1], self.right_keys),
        ):
            for row, weight in node.query((), [()]).items():
                self.sides[side].add(project(row, cols), row, weight)

    def _output(self, key: Key) -> ZSet[Row]:
        out: ZSet[Row] = ZSet()
        lefts, rights = self.sides[0].get(key) or {}, self.sides[1].get(key) or {}
        for left, lw in lefts.items():
            for right, rw in rights.items():
                out.add(self._combine(left, right), lw * rw)
        return out

    def query(self, cols: tuple[int, ...], keys: Collection[Key]) -> ZSet[Row]:
        if cols == self.left_keys:
            missing = self.sides[0].missing(keys)
            if missing:
                # Ask both inputs before filling either: if an input's upquery cannot be
                # answered yet (it raises), neither side holds the key and nothing is half done.
                answers = []
                for node, key_cols in ((self.inputs[0], self.left_keys), (self.inputs[1], self.right_keys)):
                    answers.append(group_by_key(node.query(key_cols, missing).items(), key_cols, missing))
                for side, got in enumerate(answers):
                    for key, rows in got.items():
                        self.sides[side].fill(key, rows)
                self.metrics.filled_keys += len(missing)
            out: ZSet[Row] = ZSet()
            for key in dict.fromkeys(keys):
                out.extend(self._output(key))
            return out
        assert not self.partial, f"partial join queried on {cols}, keyed on {self.left_keys}"
        out = ZSet()
        for key, _ in list(self.sides[0].groups()):
            out.extend(self._output(key))
        return select_keys(out, cols, set(keys))

    def describe(self) -> str:
        keys = tuple(self.inputs[0].schema[i] for i in self.left_keys)
        return f"Join(on {keys}, {'partial' if self.partial else 'full'})"

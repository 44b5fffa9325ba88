"""The state and upquery mechanics shared by Join and AntiJoin: two inputs, each indexed by
its key columns, filled together.

Invariant (partial mode): a key is present on both sides or on neither. An upquery by the
left key asks both inputs for the missing keys before it fills either side, so an input
that cannot answer yet (it raises) leaves both sides without the key, nothing half done.
Full mode: both sides are hydrated from their inputs, and an upquery on any columns is
answered by scanning the left side's keys. A subclass says what one key outputs.
"""

from __future__ import annotations

from collections.abc import Collection

from .keyed_state import Key, KeyedState, Row
from .node import Node, group_by_key, project, select_keys
from .zset import ZSet


class KeyedPair(Node):
    stateful = True

    def __init__(
        self,
        schema: tuple[str, ...],
        left: Node,
        right: Node,
        left_keys: tuple[int, ...],
        right_keys: tuple[int, ...],
        *,
        partial: bool,
    ) -> None:
        assert len(left_keys) == len(right_keys)
        super().__init__(schema, (left, right))
        self.left_keys = left_keys
        self.right_keys = right_keys
        self.sides = (KeyedState(partial=partial), KeyedState(partial=partial))

    @property
    def partial(self) -> bool:
        return self.sides[0].partial

    def _output(self, key: Key) -> ZSet[Row]:
        """The node's whole output for one key, from both sides' state."""
        raise NotImplementedError

    def hydrate(self) -> None:
        if self.partial:
            return
        for side, node, cols in (
            (0, self.inputs[0], self.left_keys),
            (1, self.inputs[1], self.right_keys),
        ):
            for row, weight in node.query((), [()]).items():
                self.sides[side].add(project(row, cols), row, weight)

    def query(self, cols: tuple[int, ...], keys: Collection[Key]) -> ZSet[Row]:
        if cols == self.left_keys:
            missing = self.sides[0].missing(keys)
            if missing:
                answers = [
                    group_by_key(node.query(key_cols, missing).items(), key_cols, missing)
                    for node, key_cols in (
                        (self.inputs[0], self.left_keys),
                        (self.inputs[1], self.right_keys),
                    )
                ]
                for side, got in enumerate(answers):
                    for key, rows in got.items():
                        self.sides[side].fill(key, rows)
                self.metrics.filled_keys += len(missing)
            out: ZSet[Row] = ZSet()
            for key in dict.fromkeys(keys):
                out.extend(self._output(key))
            return out
        assert not self.partial, f"partial {self.describe()} queried on {cols}, keyed on {self.left_keys}"
        out = ZSet()
        for key, _ in list(self.sides[0].groups()):
            out.extend(self._output(key))
        return select_keys(out, cols, set(keys))

"""Extend: each row with one more column, computed by a pure function of the row.

The planner uses it to append a tuple's content id (`C := atom`).

Contract:
- Linear, stateless: a row of weight w becomes `row + (fn(row),)` of weight w.
- `fn` must be pure (same row, same value), or a retraction would not cancel
  the insertion it undoes.
- Upquery: when the asked columns do not include the computed one, they are
  asked of the input unchanged (a missing key is the input's business); when
  they do, the value cannot be inverted, so the whole input is asked for
  (`cols=()`) and the answer filtered: the input must then be full.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from pomoview.dataflow.node import Node, select_keys
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.upquery import Upquery, covered, rows
from pomoview.dataflow.zset import ZSet


class Extend(Node):
    def __init__(self, parent: Node, name: str, fn: Callable[[Row], object], label: str = "") -> None:
        super().__init__(parent.schema + (name,), (parent,))
        self.fn = fn
        self.label = label

    def apply(self, row: Row) -> Row:
        return row + (self.fn(row),)

    def on_delta(self, port: int, delta: ZSet[Row]) -> ZSet[Row]:
        return delta.map(self.apply)

    def upquery(self, cols: tuple[int, ...], keys: Collection[Key]) -> Upquery[ZSet[Row]]:
        computed = len(self.schema) - 1
        if computed not in cols:
            return (yield rows(self.inputs[0], cols, keys)).map(self.apply)
        everything = (yield rows(self.inputs[0], (), [()])).map(self.apply)
        return select_keys(everything, cols, set(keys))

    def covers_step(self, cols: tuple[int, ...], key: Key) -> Upquery[bool]:
        computed = len(self.schema) - 1
        kept = [(c, v) for c, v in zip(cols, key, strict=True) if c != computed]
        return (yield covered(self.inputs[0], tuple(c for c, _ in kept), tuple(v for _, v in kept)))

    def describe(self) -> str:
        return f"Extend({self.schema[-1]}{': ' + self.label if self.label else ''})"

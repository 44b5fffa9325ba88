"""DistinctIncremental (PomoFlow §2.9.18): the delta of distinct, against the input's history.

A delta's element changes the output when its weight moves the element's total
across zero: +1 when the total becomes positive, -1 when it stops being
positive (the spec's "opposite sign" rule, stated exactly). The history is an
untimed trace (all that matters at the root is the sum before this epoch), kept
here as a KeyedState so that it can be partial.

Contract:
- Output: +1 when a row's multiplicity becomes positive, -1 when it stops being
  positive. Not linear.
- State: each row's multiplicity, indexed by the key columns.
- Partial mode: a delta whose key is missing is dropped; an upquery asks the
  input for the missing keys and keeps the multiplicities.
- In order (InOrder, operators/in_order.py): a TopK below may have it keep the first rows
  of some keys in the TopK's order too, which it reads past its bound to refill a window.
"""

from __future__ import annotations

from collections.abc import Collection

from pomoview.dataflow.node import Node, group_by_key, project, select_keys
from pomoview.dataflow.operators.in_order import InOrder
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.upquery import Upquery, rows
from pomoview.dataflow.zset import ZSet


def distinct_incremental(batch: ZSet[Row], history: ZSet[Row]) -> ZSet[Row]:
    """The change of distinct(history) when `batch` is added to it."""
    out: ZSet[Row] = ZSet()
    for row, weight in batch.items():
        old = history.weight(row)
        out.add(row, (old + weight > 0) - (old > 0))
    return out


class DistinctIncremental(InOrder):
    def __init__(self, parent: Node, key_cols: tuple[int, ...], *, partial: bool) -> None:
        super().__init__(parent.schema, (parent,), key_cols, partial=partial)

    def on_delta(self, port: int, delta: ZSet[Row]) -> ZSet[Row]:
        out: ZSet[Row] = ZSet()
        for row, weight in delta.items():
            key = project(row, self.key_cols)
            group = self.state.get(key)
            if group is None:
                self.metrics.dropped += 1
                continue
            old = group.get(row, 0)
            self.state.add(key, row, weight)
            new = old + weight
            if old <= 0 < new:
                out.add(row, 1)
            elif new <= 0 < old:
                out.add(row, -1)
        return out

    def upquery(self, cols: tuple[int, ...], keys: Collection[Key]) -> Upquery[ZSet[Row]]:
        if not self.partial:
            return select_keys(self.state.as_zset().distinct(), cols, set(keys))
        assert cols == self.key_cols, f"partial distinct queried on {cols}, keyed on {self.key_cols}"
        # Again after a fill: an eviction between the walk's rounds may have taken a key
        # that was present when the walk first looked.
        while missing := self.state.missing(keys):
            answer = yield rows(self.inputs[0], cols, missing)
            # Only what is still missing: another walk may have filled some meanwhile.
            still = set(self.state.missing(missing))
            for key, got in group_by_key(answer.items(), cols, missing).items():
                if key in still:
                    self.state.fill(key, got)
            self.metrics.filled_keys += len(still)
        out: ZSet[Row] = ZSet()
        for key in dict.fromkeys(keys):
            for row, weight in (self.state.get(key) or {}).items():
                if weight > 0:
                    out.add(row, 1)
        return out

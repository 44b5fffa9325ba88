"""InOrder: a keyed state that also holds some keys' first rows in a reader's order, so that
a TopK below it refills a window with the few rows past its bound (dataflow/state/
ordered_index.py), not with every row of the key.

Contract (beside the state's own, which this changes in nothing):
- For: a KeyedNode whose output is the exact set delta of its state's present rows, rows
  with a positive weight (SourceIndex, DistinctIncremental): that delta is what keeps each
  order's index exact.
- State: per order asked (`rows_in_order`), an OrderedIndex of the keys read in that order;
  a key's entry is built at its first read in the order, from the state (never through an
  upquery), and follows every output delta after.
- On a missing key: `rows_in_order` answers None, and the caller pulls (or evicts) instead.
- Evictions: an evicted key leaves every index with it; Stats counts the indexes' bytes in
  this state's (`state_summary`), so the memory budget sees them.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Sequence
from typing import Any

from pomoview.dataflow.node import KeyedNode, StateSummary, Value, rows_by_key
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.state.ordered_index import OrderedIndex, SortKey
from pomoview.dataflow.time import Time
from pomoview.dataflow.zset import ZSet


class InOrder(KeyedNode):
    """The base of the keyed states whose output is their set delta; see the module docstring."""

    # order -> its index; None until a first read in order (most states never have one).
    _orders: dict[Hashable, OrderedIndex] | None = None

    def rows_in_order(
        self, order: Hashable, sort_key: SortKey, key: Key, after: Any | None, count: int
    ) -> list[Row] | None:
        """Up to `count` present rows of `key` whose sort keys (`sort_key`, which `order`
        names) come after `after` (None: from the first), in order; None when `key` is
        missing here. Reads the index, built or grown from the state when it cannot answer."""
        group = self.state.get(key)
        if group is None:
            return None
        if self._orders is None:
            self._orders = {}
        index = self._orders.get(order)
        if index is None:
            index = self._orders[order] = OrderedIndex(sort_key)
        got = index.rows_after(key, after, count) if key in index else None
        while got is None:
            index.build(key, group, index.size_for(key, after, count))
            got = index.rows_after(key, after, count)
        return got

    def cut_at(self, key: Key) -> bool:
        """Whether rows of `key` lie past those this state holds (a SourceWindow's cut key);
        a state that holds every row of its present keys says False."""
        return False

    def hold_whole(self, keys: Collection[Key]) -> None:
        """A subscription will hold `keys`: from now on they are held with every row (a
        SourceWindow's concern; every other InOrder already does)."""

    def release_whole(self, keys: Collection[Key]) -> None:
        """Undoes `hold_whole(keys)`."""

    def order_index(self, order: Hashable) -> OrderedIndex | None:
        """The index of `order`, if a read in that order made one."""
        return None if self._orders is None else self._orders.get(order)

    def check_orders(self) -> None:
        """Asserts every index against the state (tests)."""
        for index in (self._orders or {}).values():
            index.check(self.state.get)

    def eval(self, inputs: Sequence[Value | None], time: Time) -> Value | None:
        out = super().eval(inputs, time)
        if self._orders and isinstance(out, ZSet) and out:
            changes = rows_by_key(out.items(), self.key_cols)
            for index in self._orders.values():
                index.apply(changes)
        return out

    def keys_evicted(self, keys: Sequence[Key]) -> None:
        if self._orders:
            for index in self._orders.values():
                index.drop(keys)

    def state_summary(self) -> StateSummary:
        summary = super().state_summary()
        if self._orders:
            summary.bytes += sum(index.estimate_bytes() for index in self._orders.values())
        return summary

"""Aggregate (PomoFlow §2.9.1): summarizes each key's values of an IndexedZSet, giving a ZSet.

`aggregate(function, indexed)` is the definition: for every key of `indexed`
(a key with an empty group is not in an IndexedZSet) whose aggregate has a
value, the row `output(key, value)` with weight 1. The aggregated value of a
row is `value_fn(row)`, or the row itself when `value_fn` is None (what count
wants: it counts whole rows).

The `Aggregate` node maintains that output incrementally: its input stream is
the delta of the indexed ZSet (what `IndexWith.eval` returns), and its output
is the delta of `aggregate(function, integrated input)`.

Contract:
- Not linear (even for count and sum: a group's row is replaced, not added to).
  On each delta, for every key whose aggregate changed: -1 for the old output
  row (if it had one) and +1 for the new one. A group whose result is NO_VALUE
  has no row; neither has a group that became empty (the empty-group-is-0
  semantics of count and sum belongs to AggregateJoin, not here).
- State: one incremental aggregate state per non-empty group (aggregates.py:
  O(1) per change for count and sum, O(log n) for min and max; a user-defined
  aggregate is recomputed over its changed group) and the output row last
  emitted for each key, which `query` answers from.
- Full only: there is no partial mode, so no key is ever missing and nothing is
  dropped. It is hydrated from its input's whole indexed output.
- The integrated input must have non-negative weights (a set or a bag, as every
  relation): count and sum know a group is empty by its total weight being 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Hashable, Sequence
from typing import cast

from pomoview.dataflow.node import FetchRequest, Node, Value, active, select_keys
from pomoview.dataflow.operators.index_with import IndexWith
from pomoview.dataflow.state.aggregates import (
    NO_VALUE,
    GroupState,
    UserAggregate,
    call_user,
    make,
    name,
    same,
)
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.time import Time
from pomoview.dataflow.zset import IndexedZSet, ZSet

ValueFn = Callable[[Row], object]
OutputFn = Callable[[Hashable, object], Row]


def _pair(key: Hashable, value: object) -> Row:
    return (key, value)


def _reference(function: str | UserAggregate, values: dict[object, int]) -> object:
    """The aggregate of a multiset (value -> non-zero weight), from scratch."""
    if isinstance(function, UserAggregate):
        return call_user(function, tuple(sorted((v, w) for v, w in values.items() if w > 0)))  # type: ignore[type-var]
    if function == "count":
        return sum(values.values())
    if function == "sum":
        if any(isinstance(v, float) for v in values):
            # Correctly rounded: each value repeated by its weight, exactly summed.
            expanded = [v if w > 0 else -v for v, w in values.items() for _ in range(abs(w))]  # type: ignore[operator]
            return math.fsum(expanded)  # type: ignore[arg-type]
        return sum(v * w for v, w in values.items())  # type: ignore[operator,misc]
    positive = [v for v, w in values.items() if w > 0]
    if not positive:
        return NO_VALUE
    if function == "min":
        return min(positive)  # type: ignore[type-var]
    if function == "max":
        return max(positive)  # type: ignore[type-var]
    raise ValueError(f"unknown aggregate {function!r}")


def aggregate(
    function: str | UserAggregate,
    indexed: IndexedZSet[Hashable, Row],
    value_fn: ValueFn | None = None,
    output: OutputFn = _pair,
) -> ZSet[Row]:
    """The spec's aggregate operator, computed from scratch over the whole indexed ZSet."""
    out: ZSet[Row] = ZSet()
    for key, group in indexed.groups():
        values: dict[object, int] = {}
        for row, weight in group.items():
            value = row if value_fn is None else value_fn(row)
            values[value] = values.get(value, 0) + weight
        result = _reference(function, {v: w for v, w in values.items() if w})
        if result is not NO_VALUE:
            out.add(output(key, result), 1)
    return out


class Aggregate(Node):
    stateful = True

    def __init__(
        self,
        parent: IndexWith,
        function: str | UserAggregate,
        value_fn: ValueFn | None = None,
        output: OutputFn = _pair,
        *,
        schema: tuple[str, ...] | None = None,
    ) -> None:
        super().__init__(schema if schema is not None else ("key", name(function)), (parent,))
        self.function = function
        self.value_fn = value_fn
        self.output = output
        self.new_state = make(function)
        self.states: dict[Hashable, GroupState] = {}  # non-empty groups only
        self.rows: dict[Hashable, Row] = {}  # the output row of each key that has one

    def _value(self, row: Row) -> object:
        return row if self.value_fn is None else self.value_fn(row)

    def _update(self, key: Hashable, changes: ZSet[Row], out: ZSet[Row]) -> None:
        state = self.states.get(key)
        if state is None:
            state = self.new_state()
            old: object = NO_VALUE
        else:
            old = state.result()
        for row, weight in changes.items():
            state.add(self._value(row), weight)
        if state.empty():
            self.states.pop(key, None)
            new: object = NO_VALUE
        else:
            self.states[key] = state
            new = state.result()
        if same(old, new):
            return
        old_row = self.rows.pop(key, None)
        if old_row is not None:
            out.add(old_row, -1)
        if new is not NO_VALUE:
            new_row = self.rows[key] = self.output(key, new)
            out.add(new_row, 1)

    def eval(self, inputs: Sequence[Value | None], time: Time) -> Value | None:
        (delta,) = inputs
        out: ZSet[Row] = ZSet()
        if not active(delta):
            return out
        assert isinstance(delta, IndexedZSet), f"{self.describe()} takes an IndexedZSet"
        for key, changes in cast(IndexedZSet[Hashable, Row], delta).groups():
            self._update(key, changes, out)
        return out

    def hydrate(self) -> list[FetchRequest]:
        parent = self.inputs[0]
        assert isinstance(parent, IndexWith), f"{self.describe()} reads an IndexWith"
        for key, group in parent.query_indexed((), [()]).groups():
            self._update(key, group, ZSet())
        return []

    def upquery(self, cols: tuple[int, ...], keys: Collection[Key]) -> ZSet[Row]:
        out: ZSet[Row] = ZSet()
        for row in self.rows.values():
            out.add(row, 1)
        return select_keys(out, cols, keys)

    def describe(self) -> str:
        return f"Aggregate({name(self.function)})"

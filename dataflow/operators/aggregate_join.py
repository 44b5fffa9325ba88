"""AggregateJoin: each body row extended with an aggregate over its group.

This is how a rule such as `a(id: I, n: N) :- b(id: I), N := count : c(id: I)`
runs: for every row of the body (input 0) it looks up the aggregate of the
aggregated atom's rows (input 1) that share its grouping columns, and emits the
body row with that value appended. `count` and `sum` of an empty group are 0;
`min` and `max` of an empty group have no value and emit nothing (clingo's
semantics, DESIGN §2). `count` counts whole tuples (`value_col` is None); the
others aggregate the atom's column `value_col`. A UserAggregate (aggregates.py)
decides itself what an empty group gives.

Contract:
- Not linear: a change in a group retracts every body row with the old value
  and emits it with the new one.
- State (keyed_pair.py): the body rows by the key the node below upqueries by (the
  keyed side is always the body), indexed by the group columns too, and one
  incremental aggregate state per group key (aggregates.py: a total for count and
  sum, a multiset and a heap for min and max), updated by the atom's deltas, never
  recomputed. It keeps no atom rows: count and sum keep a total per group.
- Partial mode (the downstream key traces to body columns, not the result): an
  upquery asks the body input for the keys and the atom input for the groups it
  lacks (a dependent upquery), and fills both at once. A delta whose key or group is
  missing is dropped (and counted in `metrics.dropped`); a body delta whose group is
  missing evicts its key here and below. With no group columns the aggregate is one
  full group (no provenance), and the body side may still be partial.
- Full mode: both sides hydrated from their inputs; a group's state is dropped
  when the group becomes empty, and a group with no state aggregates nothing.
- Batches: the atom's delta is taken per group; for a state whose `add` ignores its
  values (count: `GroupState.ignores_values`), as one net weight per group, so a Zipf batch
  of votes costs a dict update per row.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Collection, Mapping

from pomoview.dataflow.node import EvictCols, Node, project
from pomoview.dataflow.state.aggregates import (
    NO_VALUE,
    GroupState,
    UserAggregate,
    make,
    name,
    same,
)
from pomoview.dataflow.state.keyed_pair import KeyedPair
from pomoview.dataflow.state.keyed_state import Key, PackedGroup, Row, count_eviction
from pomoview.dataflow.zset import ZSet

__all__ = ["NO_VALUE", "AggregateJoin"]

_UNSET = object()


# `_other_summary` sizes the groups from this many of them (their states are alike: one
# aggregate function's).
_SUMMARY_SAMPLE = 64


def _state_bytes(state: object) -> int:
    """An estimate of one group state's memory: the object and its attributes' containers."""
    total = sys.getsizeof(state)
    for value in getattr(state, "__dict__", {}).values():
        total += sys.getsizeof(value)
    for slot in getattr(type(state), "__slots__", ()):
        total += sys.getsizeof(getattr(state, slot, None))
    return total


class AggregateJoin(KeyedPair):
    def __init__(
        self,
        body: Node,
        atom: Node,
        body_keys: tuple[int, ...],
        atom_keys: tuple[int, ...],
        value_col: int | None,
        function: str | UserAggregate,
        result_name: str,
        *,
        partial: bool,
        side_key: tuple[int, ...] | None = None,
        other_partial: bool | None = None,
    ) -> None:
        super().__init__(
            body.schema + (result_name,),
            body,
            atom,
            body_keys,
            atom_keys,
            partial=partial,
            side_key=side_key,
            other_partial=other_partial,
        )
        self.body_keys = body_keys
        self.atom_keys = atom_keys
        self.value_col = value_col
        self.function = function
        self.new_state = make(function)
        # The atom's batches as one net weight per group (count: see GroupState).
        self._net_weights = self.new_state().ignores_values
        # One aggregate state per group key. Partial: a key is present iff it has a
        # state (maybe of an empty group). Full: every key is present; empty groups
        # have no state.
        self.groups: dict[Key, GroupState] = {}
        self._empty_value: object = _UNSET
        self._body_width = len(body.schema)

    @property
    def bodies(self) -> object:
        return self.keyed

    def _element(self, row: Row) -> object:
        # count counts whole tuples; the other aggregates take the value column.
        return row if self.value_col is None else row[self.value_col]

    def _value(self, key: Key) -> object:
        state = self.groups.get(key)
        if state is not None:
            return state.result()
        if self._empty_value is _UNSET:
            self._empty_value = self.new_state().result()
        return self._empty_value

    def _load(self, rows: list[tuple[Row, int]]) -> GroupState:
        state = self.new_state()
        for row, weight in rows:
            state.add(self._element(row), weight)
        return state

    def _output_sources(self, col: int) -> dict[int, int]:
        if col >= self._body_width:
            return {}
        found = {0: col}
        if col in self.body_keys:
            found[1] = self.atom_keys[self.body_keys.index(col)]
        return found

    def _other_present(self, j: Key) -> bool:
        return not self.other_partial or j in self.groups

    def _other_fill(self, j: Key, rows: Mapping[Row, int]) -> None:
        # Invariant: a fill never overwrites a present group (KeyedState.fill).
        assert j not in self.groups, f"fill of present group {j!r}"
        if type(rows) is PackedGroup and self._net_weights:
            # A packed group is a set (every weight 1): its count is its size.
            state = self.new_state()
            state.add(None, len(rows))
            self.groups[j] = state
            return
        self.groups[j] = self._load(list(rows.items()))

    def _other_evict(self, j: Key) -> None:
        if self.groups.pop(j, None) is not None:
            count_eviction()

    def _other_keys_matching(self, cols: EvictCols, keys: Collection[Key]) -> list[Key]:
        if cols is not None and set(self.atom_keys) <= set(cols):
            where = [cols.index(c) for c in self.atom_keys]
            return [j for j in {tuple(k[i] for i in where) for k in keys} if j in self.groups]
        # The groups keep no rows to match against: evict them all.
        return list(self.groups)

    def _other_hydrate(self, rows: ZSet[Row]) -> None:
        for key, group in rows.index_with(lambda row: project(row, self.atom_keys)).groups():
            state = self._load(list(group.items()))
            if not state.empty():
                self.groups[key] = state

    def other_keys(self) -> list[Key]:
        return list(self.groups)

    def _other_summary(self) -> tuple[int, int, int]:
        # Sized from the first _SUMMARY_SAMPLE groups: the memory budget asks for this after
        # every step, and visiting every group was 6% of the apply under a write load.
        groups = len(self.groups)
        sample = [_state_bytes(s) for s in itertools.islice(self.groups.values(), _SUMMARY_SAMPLE)]
        sizes = sys.getsizeof(self.groups) + (sum(sample) * groups // len(sample) if sample else 0)
        return groups, 0, sizes

    def _emit(self, row: Row, weight: int, j: Key, out: ZSet[Row]) -> None:
        value = self._value(j)
        if value is not NO_VALUE:
            out.add(row + (value,), weight)

    def on_delta(self, port: int, delta: ZSet[Row]) -> ZSet[Row]:
        if port == self.keyed_side or not self._net_weights:
            return super().on_delta(port, delta)
        weights: dict[Key, int] = {}
        rows: dict[Key, int] = {}  # per group, for the dropped count
        cols = self.other_on
        for row, weight in delta.items():
            j = project(row, cols)
            weights[j] = weights.get(j, 0) + weight
            rows[j] = rows.get(j, 0) + 1
        out: ZSet[Row] = ZSet()
        groups, partial = self.groups, self.other_partial
        for j, weight in weights.items():
            state = groups.get(j)
            if state is None and partial:
                self.metrics.dropped += rows[j]
                continue
            if not weight:
                continue
            if state is None:
                state = groups[j] = self.new_state()  # full mode: a new group
            old = state.result()
            state.add(None, weight)
            self._changed(j, state, old, out)
        return out

    def _other_delta(self, j: Key, changes: list[tuple[Row, int]], out: ZSet[Row]) -> None:
        state = self.groups.get(j)
        if state is None:
            state = self.groups[j] = self.new_state()  # full mode: a new group
        old = state.result()
        for row, weight in changes:
            state.add(self._element(row), weight)
        self._changed(j, state, old, out)

    def _changed(self, j: Key, state: GroupState, old: object, out: ZSet[Row]) -> None:
        """After changes to group `j`, whose result was `old`: its body rows again with the
        new result, when it differs."""
        new = state.result()
        if not self.other_partial and state.empty():
            del self.groups[j]
        if same(old, new):
            return
        for body, weight in (self.by_join.get(j) or {}).items():
            if old is not NO_VALUE:
                out.add(body + (old,), -weight)
            if new is not NO_VALUE:
                out.add(body + (new,), weight)

    def describe(self) -> str:
        if not self.partial:
            return f"AggregateJoin({name(self.function)}, full)"
        by = tuple(self.inputs[0].schema[i] for i in self.side_key)
        groups = "partial" if self.other_partial else "full"
        return f"AggregateJoin({name(self.function)}, partial by {by}, groups {groups})"

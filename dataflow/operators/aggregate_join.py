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
- State: the body rows, indexed by the group key, and one incremental aggregate
  state per group key (aggregates.py: a total for count and sum, a multiset and
  a heap for min and max), updated by the atom's deltas, never recomputed.
- Partial mode (the downstream key is the group key): both sides filled
  together, a key present on one side exactly when present on the other; a delta
  whose group is missing is dropped (and counted in `metrics.dropped`).
- Full mode: both sides hydrated from their inputs; a group's state is dropped
  when the group becomes empty, and a group with no state aggregates nothing.
"""

from __future__ import annotations

from collections.abc import Collection

from ..aggregates import NO_VALUE, GroupState, UserAggregate, make, name, same
from ..keyed_state import Key, KeyedState, Row
from ..node import Node, group_by_key, project, select_keys
from ..zset import ZSet

__all__ = ["NO_VALUE", "AggregateJoin"]

_UNSET = object()


class AggregateJoin(Node):
    stateful = True

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
    ) -> None:
        super().__init__(body.schema + (result_name,), (body, atom))
        self.body_keys = body_keys
        self.atom_keys = atom_keys
        self.value_col = value_col
        self.function = function
        self.new_state = make(function)
        self.bodies = KeyedState(partial=partial)
        # One aggregate state per group key. Partial: a key is present iff it has a
        # state (maybe of an empty group). Full: every key is present; empty groups
        # have no state.
        self.groups: dict[Key, GroupState] = {}
        self._empty_value: object = _UNSET

    @property
    def partial(self) -> bool:
        return self.bodies.partial

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

    def on_delta(self, port: int, delta: ZSet[Row]) -> ZSet[Row]:
        out: ZSet[Row] = ZSet()
        if port == 0:
            for row, weight in delta.items():
                key = project(row, self.body_keys)
                if not self.bodies.add(key, row, weight):
                    self.metrics.dropped += 1
                    continue
                value = self._value(key)
                if value is not NO_VALUE:
                    out.add(row + (value,), weight)
            return out
        by_group = delta.index_with(lambda row: project(row, self.atom_keys))
        for key, changes in by_group.groups():
            state = self.groups.get(key)
            if state is None:
                if self.partial:
                    self.metrics.dropped += len(changes)
                    continue
                state = self.groups[key] = self.new_state()
            old = state.result()
            for row, weight in changes.items():
                state.add(self._element(row), weight)
            new = state.result()
            if not self.partial and state.empty():
                del self.groups[key]
            if same(old, new):
                continue
            for body, weight in (self.bodies.get(key) or {}).items():
                if old is not NO_VALUE:
                    out.add(body + (old,), -weight)
                if new is not NO_VALUE:
                    out.add(body + (new,), weight)
        return out

    def _load(self, rows: list[tuple[Row, int]]) -> GroupState:
        state = self.new_state()
        for row, weight in rows:
            state.add(self._element(row), weight)
        return state

    def hydrate(self) -> None:
        if self.partial:
            return
        for row, weight in self.inputs[0].query((), [()]).items():
            self.bodies.add(project(row, self.body_keys), row, weight)
        by_group = self.inputs[1].query((), [()]).index_with(lambda row: project(row, self.atom_keys))
        for key, rows in by_group.groups():
            state = self._load(list(rows.items()))
            if not state.empty():
                self.groups[key] = state

    def _output(self, key: Key) -> ZSet[Row]:
        out: ZSet[Row] = ZSet()
        value = self._value(key)
        if value is NO_VALUE:
            return out
        for body, weight in (self.bodies.get(key) or {}).items():
            out.add(body + (value,), weight)
        return out

    def query(self, cols: tuple[int, ...], keys: Collection[Key]) -> ZSet[Row]:
        if cols == self.body_keys:
            missing = self.bodies.missing(keys)
            if missing:
                bodies = group_by_key(
                    self.inputs[0].query(self.body_keys, missing).items(), self.body_keys, missing
                )
                values = group_by_key(
                    self.inputs[1].query(self.atom_keys, missing).items(), self.atom_keys, missing
                )
                for key in missing:
                    # Invariant: a fill never overwrites a present group (KeyedState.fill).
                    assert key not in self.groups, f"fill of present group {key!r}"
                    self.bodies.fill(key, bodies[key])
                    self.groups[key] = self._load(values[key])
                self.metrics.filled_keys += len(missing)
            out: ZSet[Row] = ZSet()
            for key in dict.fromkeys(keys):
                out.extend(self._output(key))
            return out
        assert not self.partial, f"partial aggregate queried on {cols}, keyed on {self.body_keys}"
        out = ZSet()
        for key, _ in list(self.bodies.groups()):
            out.extend(self._output(key))
        return select_keys(out, cols, set(keys))

    def describe(self) -> str:
        return f"AggregateJoin({name(self.function)}, {'partial' if self.partial else 'full'})"

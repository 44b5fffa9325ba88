"""AggregateJoin: each body row extended with an aggregate over its group.

This is how a rule such as `a(id: I, n: N) :- b(id: I), N := count : c(id: I)`
runs: for every row of the body (input 0) it looks up the aggregate of the
aggregated atom's rows (input 1) that share its grouping columns, and emits the
body row with that value appended. `count` and `sum` of an empty group are 0;
`min` and `max` of an empty group have no value and emit nothing (clingo's
semantics, DESIGN §2).

Contract:
- Not linear: a change in a group retracts every body row with the old value
  and emits it with the new one.
- State: the body rows and the aggregated values (a multiset), both indexed by
  the group key; the aggregate is recomputed from the group's multiset on change.
- Partial mode (the downstream key is the group key): both sides filled
  together; a delta whose group is missing is dropped.
- Full mode: both sides hydrated from their inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from ..keyed_state import Key, KeyedState, Row
from ..node import Node, group_by_key, project, select_keys
from ..zset import ZSet

NO_VALUE = object()


def _count(values: dict[Row, int]) -> object:
    return sum(values.values())


def _sum(values: dict[Row, int]) -> object:
    return sum(row[0] * weight for row, weight in values.items())  # type: ignore[operator,misc]


def _min(values: dict[Row, int]) -> object:
    return min((row[0] for row, w in values.items() if w > 0), default=NO_VALUE)  # type: ignore[type-var]


def _max(values: dict[Row, int]) -> object:
    return max((row[0] for row, w in values.items() if w > 0), default=NO_VALUE)  # type: ignore[type-var]


AGGREGATES: dict[str, Callable[[dict[Row, int]], object]] = {
    "count": _count,
    "sum": _sum,
    "min": _min,
    "max": _max,
}


class AggregateJoin(Node):
    stateful = True

    def __init__(
        self,
        body: Node,
        atom: Node,
        body_keys: tuple[int, ...],
        atom_keys: tuple[int, ...],
        value_col: int | None,
        function: str,
        result_name: str,
        *,
        partial: bool,
    ) -> None:
        super().__init__(body.schema + (result_name,), (body, atom))
        self.body_keys = body_keys
        self.atom_keys = atom_keys
        self.value_col = value_col
        self.function = function
        self.aggregate = AGGREGATES[function]
        self.bodies = KeyedState(partial=partial)
        # For count the whole tuple is the counted element; for the others its value column.
        self.values = KeyedState(partial=partial)

    @property
    def partial(self) -> bool:
        return self.bodies.partial

    def _element(self, row: Row) -> Row:
        return row if self.value_col is None else (row[self.value_col],)

    def _value(self, key: Key) -> object:
        values = self.values.get(key) or {}
        if self.function == "count":
            return sum(values.values())
        return self.aggregate(values)

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
            if not self.values.is_present(key):
                self.metrics.dropped += len(changes)
                continue
            old = self._value(key)
            for row, weight in changes.items():
                self.values.add(key, self._element(row), weight)
            new = self._value(key)
            if old == new and type(old) is type(new):
                continue
            for body, weight in (self.bodies.get(key) or {}).items():
                if old is not NO_VALUE:
                    out.add(body + (old,), -weight)
                if new is not NO_VALUE:
                    out.add(body + (new,), weight)
        return out

    def hydrate(self) -> None:
        if self.partial:
            return
        for row, weight in self.inputs[0].query((), [()]).items():
            self.bodies.add(project(row, self.body_keys), row, weight)
        for row, weight in self.inputs[1].query((), [()]).items():
            self.values.add(project(row, self.atom_keys), self._element(row), weight)

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
                    self.bodies.fill(key, bodies[key])
                    self.values.fill(key, [(self._element(row), w) for row, w in values[key]])
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
        return f"AggregateJoin({self.function}, {'partial' if self.partial else 'full'})"

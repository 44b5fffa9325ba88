"""Map (PomoFlow §2.9.7): transforms every element of a ZSet by a pure function.

`map_zset(fn, zset)` is the spec's operator on one value: each element e of
weight w contributes w to fn(e), so elements that collide add their weights
(and may cancel). Two nodes, both linear and stateless:

* `Map` builds each output row from input columns and constants; the planner
  uses it for projection, renaming and constant head attributes. An upquery on
  output columns is translated to the input columns they copy; output columns
  that are constants filter the keys instead, and a request left with no input
  columns asks the input for everything.
* `MapFn` applies an arbitrary pure function. Its upquery cannot translate keys
  back through the function, so it asks the input for everything (`cols=()`,
  keys `[()]`), applies the function and keeps the rows whose `cols` match
  `keys` (`select_keys`). That is correct but not demand-driven: its input must
  answer a whole-relation upquery (a full state, or a stateless node over one);
  a partial input keyed on some columns would refuse it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from operator import itemgetter
from typing import TypeVar

from pomoview.dataflow.node import EvictCols, Node, select_keys
from pomoview.dataflow.state.keyed_state import Key, PackedGroup, Row
from pomoview.dataflow.upquery import Upquery, all_cover, covered, grouped, rows
from pomoview.dataflow.zset import ZSet

E = TypeVar("E", bound=Hashable)
F = TypeVar("F", bound=Hashable)


def map_zset(fn: Callable[[E], F], zset: ZSet[E]) -> ZSet[F]:
    """Each element's weight moved to `fn(element)`; weights that meet are added."""
    return zset.map(fn)


def _project_one(delta: ZSet[Row], i: int) -> ZSet[Row]:
    """`map_zset` of the projection onto column `i`, the column indexed inline: a function
    call per row was most of a vote step's Map (cProfile of bench/apply_rate.py)."""
    sums: dict[Row, int] = {}
    get = sums.get
    for row, weight in delta.items():
        key = (row[i],)
        sums[key] = get(key, 0) + weight
    return ZSet.of_weights(sums if all(sums.values()) else {k: w for k, w in sums.items() if w})


class Column:
    """Copies input column `index`."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return f"Column({self.index})"


class Constant:
    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"Constant({self.value!r})"


Output = Column | Constant


class Map(Node):
    def __init__(self, parent: Node, schema: tuple[str, ...], outputs: Sequence[Output]) -> None:
        assert len(schema) == len(outputs)
        super().__init__(schema, (parent,))
        self.outputs = tuple(outputs)
        # A rename (every column, in order): a delta passes as it is. Deltas are never
        # changed in place (a node's output already goes to each of its consumers).
        self._renames = len(outputs) == len(parent.schema) and all(
            isinstance(o, Column) and o.index == i for i, o in enumerate(outputs)
        )

    def apply(self, row: Row) -> Row:
        return tuple(o.value if isinstance(o, Constant) else row[o.index] for o in self.outputs)

    def on_delta(self, port: int, delta: ZSet[Row]) -> ZSet[Row]:
        if self._renames:
            return delta
        one = self._one_column()
        if one is not None:
            return _project_one(delta, one)
        return map_zset(self._fast_apply(), delta)

    def _one_column(self) -> int | None:
        """The input column of a projection onto one column (a count's group key), if so."""
        if len(self.outputs) == 1 and isinstance(self.outputs[0], Column):
            return self.outputs[0].index
        return None

    def _fast_apply(self) -> Callable[[Row], Row]:
        """`apply`, as a C-level itemgetter when every output copies a column (a projection,
        the common case): the per-row generator was most of a step's Map time."""
        if any(isinstance(o, Constant) for o in self.outputs):
            return self.apply
        indexes = [o.index for o in self.outputs if isinstance(o, Column)]
        if len(indexes) == 1:
            (i,) = indexes
            return lambda row: (row[i],)
        if not indexes:
            return lambda row: ()
        return itemgetter(*indexes)  # type: ignore[return-value]

    def translate(self, cols: tuple[int, ...]) -> tuple[int, ...]:
        """The input columns an upquery on output `cols` asks for (constants dropped)."""
        parent_cols: list[int] = []
        for c in cols:
            out = self.outputs[c]
            if isinstance(out, Column) and out.index not in parent_cols:
                parent_cols.append(out.index)
        return tuple(parent_cols)

    def upquery(self, cols: tuple[int, ...], keys: Collection[Key]) -> Upquery[ZSet[Row]]:
        parent_cols = self.translate(cols)
        parent_keys: set[Key] = set()
        for key in keys:
            by_col: dict[int, object] = {}
            consistent = True
            for c, v in zip(cols, key, strict=True):
                out = self.outputs[c]
                if isinstance(out, Constant):
                    consistent = consistent and out.value == v
                else:
                    by_col[out.index] = v
            if not consistent:
                continue  # a key that contradicts a constant column has no rows
            parent_keys.add(tuple(by_col[pc] for pc in parent_cols))
        if not parent_keys:
            return ZSet()
        answer = map_zset(self.apply, (yield rows(self.inputs[0], parent_cols, parent_keys)))
        return select_keys(answer, cols, set(keys))

    def upquery_grouped(
        self, cols: tuple[int, ...], keys: Collection[Key]
    ) -> dict[Key, Mapping[Row, int]] | Upquery[dict[Key, Mapping[Row, int]]]:
        """When every output column is a constant or a copy of an asked column (a projection
        onto the key, as under `count : vote(article_id: I)`), each key's answer is one row,
        weighted by the size of the input's group: the input's groups are counted, not read."""
        parent_cols = self.translate(cols)
        copied = [o.index for o in self.outputs if isinstance(o, Column)]
        if (
            len(parent_cols) != len(cols)
            or any(isinstance(self.outputs[c], Constant) for c in cols)
            or not set(copied) <= set(parent_cols)
        ):
            return super().upquery_grouped(cols, keys)
        return self._count_groups(keys, cols, parent_cols)

    def _count_groups(
        self, keys: Collection[Key], cols: tuple[int, ...], parent_cols: tuple[int, ...]
    ) -> Upquery[dict[Key, Mapping[Row, int]]]:
        at = {pc: i for i, pc in enumerate(parent_cols)}
        parent_of = {key: tuple(key[cols.index(c)] for c in cols) for key in keys}
        # parent_of's tuples are ordered like `cols`, whose copies are `parent_cols` in order.
        groups = yield grouped(self.inputs[0], parent_cols, set(parent_of.values()))
        out: dict[Key, Mapping[Row, int]] = {}
        for key, parent_key in parent_of.items():
            group = groups[parent_key]
            total = len(group) if type(group) is PackedGroup else sum(group.values())
            row = tuple(o.value if isinstance(o, Constant) else parent_key[at[o.index]] for o in self.outputs)
            out[key] = {row: total} if total else {}
        return out

    def on_evict(self, port: int, cols: EvictCols, keys: Collection[Key]) -> None:
        self.evict_below(*self._below(cols, keys))

    def pinned_step(
        self, port: int, cols: EvictCols, keys: Collection[Key]
    ) -> bool | tuple[EvictCols, Collection[Key]]:
        return self._below(cols, keys)

    def _below(self, cols: EvictCols, keys: Collection[Key]) -> tuple[EvictCols, Collection[Key]]:
        """Input columns -> every output column that copies one of them, plus the constant
        columns (their value is known): so a key below made of copies and constants is
        found exactly. No column copied: the eviction covers every row below."""
        if cols is None:
            return None, keys
        out_cols: list[int] = []
        picks: list[int | None] = []  # per output column: the position in the key, or None (constant)
        for o, output in enumerate(self.outputs):
            if isinstance(output, Constant):
                out_cols.append(o)
                picks.append(None)
            elif output.index in cols:
                out_cols.append(o)
                picks.append(cols.index(output.index))
        if all(p is None for p in picks):
            return None, keys
        constants = [o.value if isinstance(o, Constant) else None for o in self.outputs]
        mapped = [
            tuple(constants[o] if p is None else key[p] for o, p in zip(out_cols, picks, strict=True))
            for key in keys
        ]
        return tuple(out_cols), mapped

    def covers_step(self, cols: tuple[int, ...], key: Key) -> bool | Upquery[bool]:
        by_col: dict[int, object] = {}
        for c, v in zip(cols, key, strict=True):
            out = self.outputs[c]
            if isinstance(out, Column):
                if by_col.setdefault(out.index, v) != v:
                    return True  # two copies of one column with two values: no row has this key
            elif out.value != v:
                return True  # no row ever has this key: nothing above must hold it
        parent_cols = tuple(by_col)
        return all_cover([covered(self.inputs[0], parent_cols, tuple(by_col[c] for c in parent_cols))])

    def describe(self) -> str:
        return f"Map{self.schema}"


class MapFn(Node):
    """Map by an arbitrary pure function of the row (see the module docstring for its upquery)."""

    def __init__(
        self, parent: Node, schema: tuple[str, ...], fn: Callable[[Row], Row], label: str = ""
    ) -> None:
        super().__init__(schema, (parent,))
        self.fn = fn
        self.label = label

    def on_delta(self, port: int, delta: ZSet[Row]) -> ZSet[Row]:
        return map_zset(self.fn, delta)

    def upquery(self, cols: tuple[int, ...], keys: Collection[Key]) -> Upquery[ZSet[Row]]:
        everything = yield rows(self.inputs[0], (), [()])
        return select_keys(map_zset(self.fn, everything), cols, set(keys))

    def describe(self) -> str:
        return f"MapFn{self.schema}({self.label})"

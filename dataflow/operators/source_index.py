"""SourceIndex: an in-memory slice of a base relation, keyed by some of its columns.

Contract:
- Filters: optional constant equality selections, (attribute, value) pairs that
  must all hold (`()` = none). The index stands for "the tuples of the source
  matching the filters": an operation on a tuple failing them is ignored (it is
  not part of the output), and every fetch passes them to the `Fetch` callback.
- Input: the write batch's operations on the source, as a ZSet of tuples with
  weight +1 (insert) or -1 (delete). Output: the exact set delta of the matching
  tuples, so that inserting a present tuple or deleting an absent one emits nothing.
- Not linear: the output depends on which tuples are present.
- State: the present matching tuples of each key (the key columns' values); a source
  whose key leaves one int column holds a large group as an IntSet of it (keyed_state.py).
- Missing key: the operation is dropped (the source store keeps it); an upquery
  for the key fetches the matching tuples present now through the `Fetch` callback, and
  while that answer is not at hand yields a Miss: the walk reports it and resumes here. A
  fetch may answer in packed form (`PackedRows`), which fills packed groups directly, and
  `query_grouped` answers with the groups themselves (a count over them builds no row).
- Full mode: hydrated with one fetch of the whole source (of what the filters select).
- In order (InOrder, operators/in_order.py): a TopK below may have it keep the first tuples
  of some keys in the TopK's order too, which it reads past its bound to refill a window.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import numpy as np

from pomoview.dataflow.node import (
    Fetch,
    FetchRequest,
    Filters,
    group_by_key,
    matches,
    project,
    select_keys,
)
from pomoview.dataflow.operators.in_order import InOrder
from pomoview.dataflow.state.int_set import IntSet
from pomoview.dataflow.state.keyed_state import Key, KeyedState, PackedRows, Row, RowLayout
from pomoview.dataflow.upquery import Miss, Upquery, fetches_allowed
from pomoview.dataflow.zset import ZSet

# From this many rows a delta keyed by one int column is grouped by sorting (numpy).
SORT_MIN = 256

# A batch's packed columns in key order, and per run of one key: values, inserting, then the
# lowest and highest value and whether every row is inserted (`_packed_columns`).
PackedRuns = tuple[list[int], list[bool], list[int], list[int], list[bool]]


class SourceIndex(InOrder):
    kind = "source"

    def __init__(
        self,
        source: str,
        attributes: tuple[str, ...],
        key_cols: tuple[int, ...],
        fetch: Fetch,
        *,
        partial: bool,
        filters: Filters = (),
    ) -> None:
        super().__init__(attributes, (), key_cols, partial=partial)
        if RowLayout.fits(key_cols, len(attributes)):
            # One column besides the key (a vote's user, a link's target): a large group
            # is held as an IntSet of that column, about 8 bytes a tuple.
            self.state = KeyedState(partial=partial, layout=RowLayout(key_cols, len(attributes)))
        self.source = source
        self.fetch = fetch
        self.filters: Filters = tuple(filters)
        self._tests = tuple((attributes.index(a), v) for a, v in self.filters)

    @property
    def source_key_cols(self) -> tuple[int, ...]:
        """The key columns as positions in the source's tuples (a bulk load's keys)."""
        return self.key_cols

    def on_delta(self, port: int, delta: ZSet[Row]) -> ZSet[Row]:
        # The batch grouped by key first: each key's state is found once, and a packed group
        # takes its rows at once (KeyedState.set_presence).
        if len(self.key_cols) == 1 and not self._tests and len(delta) >= SORT_MIN:
            by_int = self._by_int_key(delta)
            if by_int is not None:
                return by_int
        tests = self._tests
        by_key: dict[Key, list[tuple[Row, int]]] = {}
        cols = self.key_cols
        if len(cols) == 1:
            (c,) = cols
            for row, op in delta.items():
                if not tests or matches(row, tests):
                    by_key.setdefault((row[c],), []).append((row, op))
        else:
            for row, op in delta.items():
                if not tests or matches(row, tests):
                    by_key.setdefault(project(row, cols), []).append((row, op))
        weights: dict[Row, int] = {}
        set_presence = self.state.set_presence
        for key, ops in by_key.items():
            changed = set_presence(key, ops)
            if changed is None:
                self.metrics.dropped += len(ops)
            else:
                weights.update(changed)
        return ZSet.of_weights(weights)

    def _by_int_key(self, delta: ZSet[Row]) -> ZSet[Row] | None:
        """`on_delta` for one int key column: the rows sorted by key with numpy, and only the
        rows of present keys gathered (under a write load most keys of a Zipf batch are cold:
        their rows are counted, not grouped). None when the keys are not all int64."""
        items = list(delta.items())
        (c,) = self.key_cols
        keys = np.array([row[c] for row, _ in items])
        if keys.dtype != np.int64:
            return None
        order = np.argsort(keys, kind="stable")
        ordered = keys[order]
        cuts = (np.flatnonzero(ordered[1:] != ordered[:-1]) + 1).tolist()
        starts, ends = [0, *cuts], [*cuts, len(items)]
        state, at = self.state, order.tolist()
        packed = self._packed_columns(items, order, starts)
        weights: dict[Row, int] = {}
        if packed is None:
            for key, start, end in zip(ordered[starts].tolist(), starts, ends, strict=True):
                changed = state.set_presence((key,), [items[i] for i in at[start:end]])
                if changed is None:
                    self.metrics.dropped += end - start
                else:
                    weights.update(changed)
            return ZSet.of_weights(weights)
        # Lists taken once for the batch and sliced per key: a Zipf batch brings a few rows
        # to each of hundreds of keys, where a numpy slice and a list built per key cost
        # more than the key's own work. Per key, the lowest and highest value and whether
        # every row is inserted come from one numpy call each: a key whose rows are all
        # inserts above what it holds takes them without a membership test.
        values, inserting, lowest, highest, all_inserted = packed
        rows = [items[i][0] for i in at]
        set_presence_values, insert_above = state.set_presence_values, state.insert_above
        run_keys = [(key,) for key in ordered[starts].tolist()]
        # A partial state's missing keys (most of a Zipf batch's, under a write load) are found
        # in one C loop, and their rows counted as dropped without a call per key.
        groups = state.peek_all(run_keys) if state.partial else [True] * len(run_keys)
        runs = zip(run_keys, groups, starts, ends, lowest, highest, all_inserted, strict=True)
        inserted: list[Row] = []  # rows new to their keys, weighed 1 together at the end
        for key, group, start, end, low, high, inserts in runs:
            if group is None:
                self.metrics.dropped += end - start
                continue
            if inserts and insert_above(key, values[start:end], low, high):
                inserted += rows[start:end]
                continue
            changed = set_presence_values(key, rows[start:end], values[start:end], inserting[start:end])
            if changed is None:
                self.metrics.dropped += end - start
            else:
                weights.update(changed)
        weights.update(dict.fromkeys(inserted, 1))
        return ZSet.of_weights(weights)

    def _packed_columns(
        self, items: list[tuple[Row, int]], order: np.ndarray, starts: list[int]
    ) -> PackedRuns | None:
        """For a packed state: the rows' values in the packed column (64-bit ints) and
        whether each is inserted, in `order`, then per run of one key (from each of
        `starts`) its lowest and highest value and whether all its rows are inserted; taken
        once for the batch. None without a layout or when a value is not a 64-bit int."""
        layout = self.state.layout
        if layout is None:
            return None
        p = layout.value_pos
        column = [row[p] for row, _ in items]
        values = np.array(column)
        # A bool would pass as 0 or 1 and come back as an int (int_set.fits refuses it too).
        if values.dtype != np.int64 or bool in set(map(type, column)):
            return None
        inserting = np.array([op for _, op in items]) > 0
        values, inserting = values[order], inserting[order]
        return (
            values.tolist(),
            inserting.tolist(),
            np.minimum.reduceat(values, starts).tolist(),
            np.maximum.reduceat(values, starts).tolist(),
            np.logical_and.reduceat(inserting, starts).tolist(),
        )

    def hydrate(self) -> list[FetchRequest]:
        if self.state.partial:
            return []
        rows = self.fetch(self.source, (), [()], self.filters)
        if rows is None:
            return [FetchRequest(self.source, (), ((),), self.filters)]
        self.metrics.fetches += 1
        for row in rows:
            self.state.add(project(row, self.key_cols), row, 1)
        return []

    def _fill(self, cols: tuple[int, ...], keys: Collection[Key]) -> Upquery[None]:
        """Fills the missing `keys` from the fetch; while it is not at hand, yields a Miss
        (the walk parks here and asks again at its next round: this is where it resumes)."""
        names = tuple(self.schema[c] for c in cols)
        while True:
            missing = self.state.missing(keys)  # again after a round: another walk may have filled some
            if not missing:
                return
            rows = self.fetch(self.source, names, missing, self.filters) if fetches_allowed() else None
            if rows is not None:
                break
            yield Miss(FetchRequest(self.source, names, tuple(missing), self.filters))
        self.metrics.fetches += 1
        layout = self.state.layout
        if isinstance(rows, PackedRows) and layout is not None and rows.layout.same(layout):
            # A packed answer fills the packed groups as they are: no row is built.
            for key in missing:
                self.state.fill_packed(key, rows.groups.get(key) or IntSet())
        else:
            fetched = group_by_key(((tuple(row), 1) for row in rows), cols, missing)
            for key, got in fetched.items():
                self.state.fill(key, got)
        self.metrics.filled_keys += len(missing)

    def upquery_grouped(
        self, cols: tuple[int, ...], keys: Collection[Key]
    ) -> dict[Key, Mapping[Row, int]] | Upquery[dict[Key, Mapping[Row, int]]]:
        if not self.state.partial or cols != self.key_cols:
            return super().upquery_grouped(cols, keys)
        return self._grouped(cols, keys)

    def _grouped(self, cols: tuple[int, ...], keys: Collection[Key]) -> Upquery[dict[Key, Mapping[Row, int]]]:
        yield from self._fill(cols, keys)
        out = {}
        for key in dict.fromkeys(keys):
            group = self.state.get(key)
            assert group is not None
            out[key] = group
        return out

    def upquery(self, cols: tuple[int, ...], keys: Collection[Key]) -> ZSet[Row] | Upquery[ZSet[Row]]:
        if not self.state.partial:
            return select_keys(self.state.as_zset(), cols, keys)
        assert cols == self.key_cols, f"{self.describe()}: query on {cols}, keyed on {self.key_cols}"
        return self._rows(cols, keys)

    def _rows(self, cols: tuple[int, ...], keys: Collection[Key]) -> Upquery[ZSet[Row]]:
        yield from self._fill(cols, keys)
        out: ZSet[Row] = ZSet()
        for key in dict.fromkeys(keys):
            group = self.state.get(key)
            assert group is not None
            for row, weight in group.items():
                out.add(row, weight)
        return out

    def describe(self) -> str:
        mode = "partial" if self.partial else "full"
        keys = tuple(self.schema[c] for c in self.key_cols)
        where = "".join(f", {a} == {v!r}" for a, v in self.filters)
        return f"SourceIndex({self.source} by {keys}{where}, {mode})"

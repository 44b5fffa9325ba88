"""The state and upquery mechanics shared by Join, AntiJoin and AggregateJoin: two inputs
matched on join columns, one of them (the *keyed side*) indexed by the key the node below
upqueries by, the other (the *other side*) indexed by the join columns.

Partial mode (Noria's join upquery): the key traces to columns of the keyed side only.
- An upquery for keys K asks the keyed input for K, takes the join keys J of the rows it
  gets, and asks the other input for the J that are missing on the other side: a
  *dependent upquery*. Both sides are filled only once both answered, in one call on the
  dataflow thread, so the answer is a snapshot of one epoch (invariant 3). When K is the
  join columns themselves, J = K is known up front and both inputs are asked at once.
- Invariant (checked by `check`): every join key of a present keyed row is present on the
  other side. So a delta on the other side for a missing join key meets no present keyed
  row, and is dropped (invariant 2) without loss; one for a present join key is joined
  with the present keyed rows of that join key, found through `by_join`, an index of the
  keyed side's present rows by the join columns.
- A delta on the keyed side for a missing key is dropped. One for a present key whose join
  key is missing on the other side cannot be joined (a write never upqueries): the node
  drops it and *evicts* the key, here and below (Noria's join eviction), so the next read
  upqueries it again.
- An eviction from the other input (join keys J) evicts the keyed rows of J first, to keep
  the invariant.

Full mode: both sides keyed by the join columns and hydrated from their inputs; an upquery
by the join columns reads them, any other upquery scans.

A subclass keeps the other side's state and says what a keyed row outputs.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from pomoview.dataflow.node import (
    EvictCols,
    FetchRequest,
    Node,
    StateSummary,
    group_by_key,
    matching_keys,
    project,
    rows_by_key,
    select_keys,
)
from pomoview.dataflow.state.keyed_state import Key, KeyedState, Row
from pomoview.dataflow.upquery import Upquery, ask_all, grouped, rows
from pomoview.dataflow.zset import ZSet


def _reorder(keys: Iterable[Key], have: tuple[int, ...], want: tuple[int, ...]) -> list[Key]:
    """Keys over columns `have` as keys over the same columns in the order `want`."""
    if have == want:
        return list(keys)
    where = [have.index(c) for c in want]
    return [tuple(k[i] for i in where) for k in keys]


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
        keyed_side: int = 0,
        side_key: tuple[int, ...] | None = None,
        other_partial: bool | None = None,
    ) -> None:
        """`side_key`: the keyed side's key columns (default: its join columns, which is the
        only choice in full mode). `other_partial`: whether the other side's state is partial
        (default: as `partial`); it is full when the other input has no provenance for J."""
        assert len(left_keys) == len(right_keys)
        super().__init__(schema, (left, right))
        self.left_keys = left_keys
        self.right_keys = right_keys
        self.keyed_side = keyed_side
        self.keyed_on = left_keys if keyed_side == 0 else right_keys
        self.other_on = right_keys if keyed_side == 0 else left_keys
        self.side_key = self.keyed_on if side_key is None or not partial else side_key
        self.keyed = KeyedState(partial=partial)
        # The keyed side's present rows by join key: the keyed state itself when it is keyed
        # by the join columns in their order.
        self.by_join = self.keyed if self.side_key == self.keyed_on else KeyedState(partial=False)
        self.other_partial = partial if other_partial is None else other_partial

    @property
    def partial(self) -> bool:
        return self.keyed.partial

    # -- what a subclass provides -------------------------------------------------------

    def _other_present(self, j: Key) -> bool:
        raise NotImplementedError

    def _other_missing(self, js: Iterable[Key]) -> list[Key]:
        return [j for j in dict.fromkeys(js) if not self._other_present(j)]

    def _other_fill(self, j: Key, rows: Mapping[Row, int]) -> None:
        """Marks join key `j` present on the other side with exactly `rows` (row -> weight)."""
        raise NotImplementedError

    def _other_evict(self, j: Key) -> None:
        raise NotImplementedError

    def _other_keys_matching(self, cols: EvictCols, keys: Collection[Key]) -> list[Key]:
        raise NotImplementedError

    def _other_hydrate(self, rows: ZSet[Row]) -> None:
        raise NotImplementedError

    def _emit(self, row: Row, weight: int, j: Key, out: ZSet[Row]) -> None:
        """Adds to `out` what the keyed row `row` (of `weight`) outputs against the other
        side's current state for its join key `j`."""
        raise NotImplementedError

    def _other_delta(self, j: Key, changes: list[tuple[Row, int]], out: ZSet[Row]) -> None:
        """Applies the other side's changes for the present join key `j` and adds the change
        of the output of the keyed rows of `j` to `out`."""
        raise NotImplementedError

    def _output_sources(self, col: int) -> dict[int, int]:
        """Where output column `col` comes from: input side -> column of that input."""
        raise NotImplementedError

    def _other_summary(self) -> tuple[int, int, int]:
        """(present keys, rows, bytes) of the other side's state."""
        raise NotImplementedError

    # -- columns --------------------------------------------------------------------------

    def _to_side(self, cols: tuple[int, ...]) -> tuple[int, ...] | None:
        """Output columns `cols` as columns of the keyed input, or None if one is not there."""
        out = []
        for c in cols:
            source = self._output_sources(c).get(self.keyed_side)
            if source is None:
                return None
            out.append(source)
        return tuple(out)

    def output_key_cols(self) -> tuple[int, ...]:
        """The output columns that carry the keyed side's key (the node's key below)."""
        found = []
        for c in self.side_key:
            found.append(
                next(o for o in range(len(self.schema)) if self._output_sources(o).get(self.keyed_side) == c)
            )
        return tuple(found)

    # -- forward --------------------------------------------------------------------------

    def _add_keyed(self, key: Key, row: Row, weight: int, j: Key) -> None:
        self.keyed.add(key, row, weight)
        if self.by_join is not self.keyed:
            self.by_join.add(j, row, weight)

    def on_delta(self, port: int, delta: ZSet[Row]) -> ZSet[Row]:
        out: ZSet[Row] = ZSet()
        if port == self.keyed_side:
            evict: list[Key] = []
            for row, weight in delta.items():
                key = project(row, self.side_key)
                if not self.keyed.is_present(key):
                    self.metrics.dropped += 1
                    continue
                j = project(row, self.keyed_on)
                if not self._other_present(j):
                    # A write never upqueries: the key cannot be kept complete, so it goes.
                    self.metrics.dropped += 1
                    self._evict_keyed([key])
                    evict.append(key)
                    continue
                self._emit(row, weight, j, out)
                self._add_keyed(key, row, weight, j)
            if evict:
                # Before `out` travels on: below, the evicted keys then drop their rows.
                self.evict_below(self.output_key_cols(), evict)
            return out
        for j, changes in rows_by_key(delta.items(), self.other_on).items():
            if not self._other_present(j):
                self.metrics.dropped += len(changes)
                continue
            self._other_delta(j, changes, out)
        return out

    # -- eviction ----------------------------------------------------------------------------

    def _evict_keyed(self, keys: Iterable[Key]) -> int:
        """Makes `keys` missing on the keyed side (not below); returns how many were present."""
        count = 0
        for key in keys:
            group = self.keyed.get(key)
            if group is None:
                continue
            if self.by_join is not self.keyed:
                for row, weight in list(group.items()):
                    self.by_join.add(project(row, self.keyed_on), row, -weight)
            self.keyed.evict(key)
            count += 1
        self.metrics.evictions += count
        return count

    def eviction_state(self) -> KeyedState | None:
        return self.keyed if self.partial else None

    def evict_own(self, keys: Collection[Key]) -> int:
        assert self.partial, f"eviction reached the full state {self.describe()}"
        evicted = [k for k in keys if self.keyed.get(k) is not None]
        self._evict_keyed(evicted)
        self.evict_below(self.output_key_cols(), evicted)
        return len(evicted)

    def _evicted_by(self, port: int, cols: EvictCols, keys: Collection[Key]) -> tuple[list[Key], list[Key]]:
        """What `on_evict(port, cols, keys)` evicts: (keys of the keyed side, join keys of
        the other side)."""
        if port == self.keyed_side:
            return matching_keys(self.keyed, self.side_key, cols, keys), []
        js = self._other_keys_matching(cols, keys)
        evicted = list(
            dict.fromkeys(project(row, self.side_key) for j in js for row in (self.by_join.get(j) or {}))
        )
        return evicted, js

    def on_evict(self, port: int, cols: EvictCols, keys: Collection[Key]) -> None:
        assert self.partial, f"eviction reached the full state {self.describe()}"
        evicted, js = self._evicted_by(port, cols, keys)
        for j in js:
            self._other_evict(j)
        self.metrics.evictions += len(js)
        self._evict_keyed(evicted)
        self.evict_below(self.output_key_cols(), evicted)

    def pinned_step(
        self, port: int, cols: EvictCols, keys: Collection[Key]
    ) -> bool | tuple[EvictCols, Collection[Key]]:
        if not self.partial:
            return True
        evicted, _ = self._evicted_by(port, cols, keys)
        pinned = self.keyed.pinned
        return True if any(k in pinned for k in evicted) else (self.output_key_cols(), evicted)

    def own_eviction_reaches_pinned(self, keys: Collection[Key]) -> bool:
        return self.pinned_below(self.output_key_cols(), [k for k in keys if self.keyed.get(k) is not None])

    # -- backward ---------------------------------------------------------------------------

    @property
    def needs_hydrate(self) -> bool:
        return not self.partial or not self.other_partial

    def hydrate(self) -> list[FetchRequest]:
        """Loads the full sides: both in full mode; in partial mode, a full other side (its
        input has no provenance for the join columns)."""
        if not self.partial:
            for row, weight in self.inputs[self.keyed_side].query((), [()]).items():
                self.keyed.add(project(row, self.side_key), row, weight)
        if not self.other_partial:
            self._other_hydrate(self.inputs[1 - self.keyed_side].query((), [()]))
        return []

    def _fill(self, missing: list[Key]) -> Upquery[bool]:
        """Fills the keyed side's `missing` keys and the other side's join keys they need;
        False (nothing filled) when an eviction between the walk's rounds took a join key
        this fill counted on: the caller then asks again."""
        keyed_input, other_input = self.inputs[self.keyed_side], self.inputs[1 - self.keyed_side]
        if set(self.side_key) == set(self.keyed_on):
            # The join keys are the asked keys: both inputs are asked in the same round.
            need = self._other_missing(_reorder(missing, self.side_key, self.keyed_on))
            asks = [rows(keyed_input, self.side_key, missing)]
            if need:
                asks.append(grouped(other_input, self.other_on, need))
            answers = yield from ask_all(asks)
            answer: ZSet[Row] = answers[0]
            other_groups: Mapping[Key, Mapping[Row, int]] = answers[1] if need else {}
        else:
            answer = yield rows(keyed_input, self.side_key, missing)
            need = self._other_missing(project(row, self.keyed_on) for row, _ in answer.items())
            other_groups = (yield grouped(other_input, self.other_on, need)) if need else {}
        # Both answers are in. Between the walk's rounds another walk may have filled some
        # of these keys (with the same rows: skip them), or an eviction taken a join key
        # that was present when `need` was decided (then the invariant needs it again).
        still = set(self.keyed.missing(missing))
        fills = group_by_key(answer.items(), self.side_key, missing)
        wanted_js = {project(row, self.keyed_on) for key in still for row, _ in fills[key]}
        if any(j not in other_groups for j in self._other_missing(wanted_js)):
            return False
        for key in still:
            got = fills[key]
            self.keyed.fill(key, got)
            if self.by_join is not self.keyed:
                for row, weight in got:
                    self.by_join.add(project(row, self.keyed_on), row, weight)
        for j in self._other_missing(need):
            self._other_fill(j, other_groups[j])
        self.metrics.filled_keys += len(still)
        return True

    def upquery(self, cols: tuple[int, ...], keys: Collection[Key]) -> Upquery[ZSet[Row]]:
        side_cols = self._to_side(cols)
        by_key = side_cols is not None and set(side_cols) == set(self.side_key)
        if not by_key:
            assert not self.partial, f"partial {self.describe()} queried on {cols}"
            out: ZSet[Row] = ZSet()
            for key in self.keyed.keys():
                for row, weight in (self.keyed.get(key) or {}).items():
                    self._emit(row, weight, project(row, self.keyed_on), out)
            return select_keys(out, cols, set(keys))
        assert side_cols is not None
        wanted = list(dict.fromkeys(_reorder(keys, side_cols, self.side_key)))
        # Again after a fill: an eviction between the walk's rounds may have taken a key
        # that was present when the walk first looked.
        while missing := self.keyed.missing(wanted):
            yield from self._fill(missing)
        out = ZSet()
        for key in wanted:
            group = self.keyed.get(key)
            assert group is not None or not self.partial
            for row, weight in (group or {}).items():
                self._emit(row, weight, project(row, self.keyed_on), out)
        return out

    # -- introspection ------------------------------------------------------------------------

    def state_summary(self) -> StateSummary:
        keyed_input = self.inputs[self.keyed_side]
        other_keys, other_rows, other_bytes = self._other_summary()
        extra = 0 if self.by_join is self.keyed else self.by_join.estimate_bytes()
        return StateSummary(
            tuple(keyed_input.schema[c] for c in self.side_key),
            self.partial,
            self.keyed.present_keys() + other_keys,
            self.keyed.row_count() + other_rows,
            self.keyed.estimate_bytes() + extra + other_bytes,
        )

    def covers_step(self, cols: tuple[int, ...], key: Key) -> bool:
        side_cols = self._to_side(cols)
        if not self.partial or side_cols is None or not set(self.side_key) <= set(side_cols):
            return True
        return self.keyed.get(tuple(key[side_cols.index(c)] for c in self.side_key)) is not None

    def check(self) -> None:
        """Asserts the invariant: every join key of a present keyed row is present on the
        other side, and `by_join` indexes exactly the present keyed rows."""
        if not self.partial:
            return
        indexed: dict[Key, dict[Row, int]] = {}
        for _, group in self.keyed.groups():
            for row, weight in group.items():
                j = project(row, self.keyed_on)
                assert self._other_present(j), f"{self.describe()}: join key {j!r} missing"
                indexed.setdefault(j, {})[row] = weight
        if self.by_join is not self.keyed:
            assert indexed == dict(self.by_join.groups()), f"{self.describe()}: by_join drifted"
        keyed_input, other_input = self.inputs[self.keyed_side], self.inputs[1 - self.keyed_side]
        for key in self.keyed.keys():
            assert keyed_input.covers(self.side_key, key), f"{self.describe()}: {key!r} missing above"
        if self.other_partial:
            for j in self.other_keys():
                assert other_input.covers(self.other_on, j), f"{self.describe()}: {j!r} missing above"

    def other_keys(self) -> list[Key]:
        """The other side's present join keys."""
        raise NotImplementedError


class KeyedPairOfRows(KeyedPair):
    """A KeyedPair whose other side keeps its rows (Join, AntiJoin): a KeyedState by the
    join columns, partial or full."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.other = KeyedState(partial=self.other_partial)

    def _other_present(self, j: Key) -> bool:
        return self.other.is_present(j)

    def _other_fill(self, j: Key, rows: Mapping[Row, int]) -> None:
        self.other.fill(j, rows.items())

    def _other_evict(self, j: Key) -> None:
        self.other.evict(j)

    def _other_keys_matching(self, cols: EvictCols, keys: Collection[Key]) -> list[Key]:
        return matching_keys(self.other, self.other_on, cols, keys)

    def _other_hydrate(self, rows: ZSet[Row]) -> None:
        for row, weight in rows.items():
            self.other.add(project(row, self.other_on), row, weight)

    def other_keys(self) -> list[Key]:
        return self.other.keys()

    def _other_summary(self) -> tuple[int, int, int]:
        return self.other.present_keys(), self.other.row_count(), self.other.estimate_bytes()

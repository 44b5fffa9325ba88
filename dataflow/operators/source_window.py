"""SourceWindow: the first rows of each key of one source in an ordered view's order, the
input of that view's TopK when the view's rows are a one-to-one map of the source's
(planner/ir/windows.py decides when), so that a fill asks the source for a key's first
`limit` tuples in the order (Spark's `ORDER BY ... LIMIT`, Zero's sort pushed to the
source), not for every tuple of the key.

Contract:
- Input: the write batch's operations on the source, as SourceIndex's (filters included).
  Output: the exact set delta of the rows it holds, each a view row (the source tuple's
  columns `columns`). Not linear.
- State: per present key a *window*. A *cut* key holds every row of the key up to its
  bound (a sort key): rows past it exist in the source and are not held. A key that is not
  cut holds every row of the key (its fill found fewer than it asked for, or a
  subscription holds it whole). Invariant: a cut key holds at least `limit` rows, so the
  TopK below reads its whole window, and its refills, from here.
- On a delta: an insert or delete up to a cut key's bound changes the window and is
  output; past the bound it is dropped (those rows are the source's). A cut window that
  inserts grow past twice `limit` rows is trimmed back to `limit`, its bound lowered (the
  TopK below holds only its first `limit` rows, all before the new bound: nothing is
  output). A cut window that deletes leave with fewer than `limit` rows can no longer say
  the first `limit`: the key is evicted here and below in the step, and kept for
  `take_short`; the server fills it again in the background with one job of at most
  `limit` tuples (and the log's deletes of it), or the next lookup does.
- Missing key: the delta is dropped. A fill asks `fetch_window` for each key's first
  `limit` tuples (a Window); when the log's deletes since the job leave a cut key fewer
  than `limit` rows, it asks again for four times as many. Without a `fetch_window` (the
  in-process engine) it fetches the key's tuples and cuts them here, to the same windows.
- Whole keys (`hold_whole`, a subscription's): filled with every tuple and never cut, so
  the TopK's refills of a pinned key always answer in the step; a cut key that becomes
  whole is evicted, and the subscription's lookup fills it again whole.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Iterable, Sequence
from typing import Any

from pomoview.dataflow.node import (
    Fetch,
    FetchRequest,
    FetchWindow,
    Filters,
    Window,
    WindowRows,
    matches,
    project,
)
from pomoview.dataflow.operators.source_index import SourceIndex
from pomoview.dataflow.operators.top_k import OrderColumns, sort_key
from pomoview.dataflow.state.keyed_state import Key, KeyedState, Row
from pomoview.dataflow.state.ordered_index import SortKey
from pomoview.dataflow.upquery import Miss, Upquery, fetches_allowed
from pomoview.dataflow.zset import ZSet

# A fill whose cut keys the log's deletes left short asks again for this many times more.
GROWTH = 4
# Keys evicted short kept for the server to fill again (`take_short`), at most.
SHORT_KEPT = 1024


class SourceWindow(SourceIndex):
    def __init__(
        self,
        source: str,
        attributes: tuple[str, ...],
        columns: tuple[int, ...],
        schema: tuple[str, ...],
        key_cols: tuple[int, ...],
        fetch: Fetch,
        *,
        order: OrderColumns,
        limit: int,
        filters: Filters = (),
    ) -> None:
        """`attributes`: the source's; `columns`: the source position of each column of the
        view row (`schema`); `key_cols`, `order`: positions in the view row."""
        super().__init__(source, attributes, (), fetch, partial=True, filters=filters)
        assert limit > 0 and key_cols, "a window has a limit and a key"
        self.schema = schema
        self.attributes = attributes
        self.columns = columns
        self.key_cols = key_cols
        self.state = KeyedState(partial=True)
        self.order = order
        self.limit = limit
        self.sort_key = sort_key(order)
        self.fetch_window: FetchWindow | None = None
        # The source order of a fill: the view's order, then every other column ascending
        # (TopK breaks ties by the whole view row, which these columns are).
        named = [(attributes[columns[c]], d) for c, d in order]
        named += [(attributes[columns[c]], False) for c in range(len(schema)) if c not in dict(order)]
        self.source_order = tuple(named)
        self.bounds: dict[Key, Any] = {}  # cut key -> its bound (a sort key)
        self.whole: dict[Key, int] = {}  # key -> how many subscriptions hold it whole
        self.fills = 0
        self.fetched_rows = 0  # tuples the fills' jobs returned
        self.ran_short = 0  # cut keys evicted when deletes left fewer than `limit` rows
        # Those keys, until the server takes them (`take_short`, after every step); an
        # in-process graph never does, so only the last SHORT_KEPT are kept.
        self.short: dict[Key, None] = {}
        self.asked_again = 0  # fills that asked for more (the log's deletes left keys short)

    @property
    def source_key_cols(self) -> tuple[int, ...]:
        return tuple(self.columns[c] for c in self.key_cols)

    def _view_row(self, row: Row) -> Row:
        return tuple(row[i] for i in self.columns)

    # -- writes -----------------------------------------------------------------------

    def on_delta(self, port: int, delta: ZSet[Row]) -> ZSet[Row]:
        tests, key_cols = self._tests, self.key_cols
        by_key: dict[Key, list[tuple[Row, int]]] = {}
        for row, op in delta.items():
            if not tests or matches(row, tests):
                out = self._view_row(row)
                by_key.setdefault(project(out, key_cols), []).append((out, op))
        weights: dict[Row, int] = {}
        short: list[Key] = []
        for key, ops in by_key.items():
            bound = self.bounds.get(key)
            if bound is not None:
                held = [(row, op) for row, op in ops if not bound < self.sort_key(row)]
                self.metrics.dropped += len(ops) - len(held)
                ops = held
            changed = self.state.set_presence(key, ops)
            if changed is None:
                self.metrics.dropped += len(ops)
                continue
            if bound is not None:
                size = len(self.state.get(key) or ())
                if size < self.limit:
                    short.append(key)
                    continue
                if size > 2 * self.limit:
                    self._trim(key)
            weights.update(changed)
        if short:
            # Invariant: a key held whole is never cut, so a short window is never pinned.
            assert not self.own_eviction_reaches_pinned(short), f"a pinned window ran short: {short}"
            self.ran_short += self.evict_own(short)
            self.short.update(dict.fromkeys(short))
            while len(self.short) > SHORT_KEPT:
                del self.short[next(iter(self.short))]
        return ZSet.of_weights(weights)

    def _trim(self, key: Key) -> None:
        """Cuts a window inserts grew back to its first `limit` rows."""
        group = self.state.get(key)
        assert group is not None
        ordered = sorted(group, key=self.sort_key)
        self.state.set_presence(key, [(row, -1) for row in ordered[self.limit :]])
        self.bounds[key] = self.sort_key(ordered[self.limit - 1])

    # -- fills ------------------------------------------------------------------------

    def _fill(self, cols: tuple[int, ...], keys: Collection[Key]) -> Upquery[None]:
        names = tuple(self.attributes[self.columns[c]] for c in cols)
        count = self.limit
        while True:
            missing = self.state.missing(keys)
            if not fetches_allowed():
                # A pull in the step (a TopK's refill) must not take a window for every row.
                missing += [k for k in dict.fromkeys(keys) if k in self.bounds]
            if not missing:
                return
            whole = [k for k in missing if k in self.whole]
            if whole:
                rows = self.fetch(self.source, names, whole, self.filters) if fetches_allowed() else None
                if rows is None:
                    yield Miss(FetchRequest(self.source, names, tuple(whole), self.filters))
                else:
                    self._fill_whole(whole, rows)
                continue
            window = Window(self.source_order, count)
            answer = self._fetch_window(names, missing, window) if fetches_allowed() else None
            if answer is None:
                pushed = window if self.fetch_window is not None else None
                yield Miss(FetchRequest(self.source, names, tuple(missing), self.filters, pushed))
            elif self._fill_windows(missing, answer, count):
                count *= GROWTH  # the short keys are still missing: ask for more
                self.asked_again += 1

    def _fetch_window(self, names: tuple[str, ...], keys: list[Key], window: Window) -> WindowRows | None:
        """The window's fetch; without a `fetch_window`, every tuple of the keys fetched and
        each key's first `window.count` kept, as the source would have answered."""
        if self.fetch_window is not None:
            return self.fetch_window(self.source, names, keys, self.filters, window)
        rows = self.fetch(self.source, names, keys, self.filters)
        if rows is None:
            return None
        groups = self._by_key(rows)
        fetched: dict[Key, list[Row]] = {}
        source_of = {self._view_row(row): row for row in rows}
        for key, group in groups.items():
            first = sorted(group, key=self.sort_key)[: window.count]
            fetched[key] = [source_of[row] for row in first]
        return WindowRows([row for got in fetched.values() for row in got], fetched)

    def _by_key(self, rows: Iterable[Row]) -> dict[Key, list[Row]]:
        """Source tuples as view rows grouped by key (each row once)."""
        groups: dict[Key, dict[Row, None]] = {}
        for row in rows:
            out = self._view_row(tuple(row))
            groups.setdefault(project(out, self.key_cols), {})[out] = None
        return {key: list(group) for key, group in groups.items()}

    def _fill_windows(self, keys: list[Key], answer: WindowRows, count: int) -> list[Key]:
        """Fills `keys` from a windowed answer; returns the cut keys left short (unfilled)."""
        groups = self._by_key(answer.rows)
        short: list[Key] = []
        for key in keys:
            fetched = answer.fetched.get(key, [])
            rows = groups.get(key, [])
            self.fetched_rows += len(fetched)
            if len(fetched) >= count:
                bound = max(self.sort_key(self._view_row(tuple(row))) for row in fetched)
                rows = [row for row in rows if not bound < self.sort_key(row)]
                if len(rows) < self.limit:
                    short.append(key)
                    continue
                self.bounds[key] = bound
            self._fill_key(key, rows)
        return short

    def _fill_whole(self, keys: list[Key], rows: Iterable[Row]) -> None:
        groups = self._by_key(rows)
        for key in keys:
            self._fill_key(key, groups.get(key, []))

    def _fill_key(self, key: Key, rows: Sequence[Row]) -> None:
        self.state.fill(key, [(row, 1) for row in rows])
        self.fills += 1
        self.metrics.fetches += 1
        self.metrics.filled_keys += 1

    # -- the TopK below ---------------------------------------------------------------

    def rows_in_order(
        self, order: Hashable, sort_key: SortKey, key: Key, after: Any | None, count: int
    ) -> list[Row] | None:
        """As InOrder's, from the window (at most `2 * limit` rows of a cut key, sorted
        here); the caller asks `cut_at` whether rows lie past them."""
        assert order == self.order, f"{self.describe()} read in order {order!r}"
        group = self.state.get(key)
        if group is None:
            return None
        ordered = sorted(group, key=self.sort_key)
        if after is not None:
            ordered = [row for row in ordered if after < self.sort_key(row)]
        return ordered[:count]

    def take_short(self) -> list[Key]:
        """The keys evicted short since the last call (the server fills them again in the
        background, so that the next read of one finds it filled)."""
        short, self.short = list(self.short), {}
        return short

    def cut_at(self, key: Key) -> bool:
        return key in self.bounds

    def hold_whole(self, keys: Collection[Key]) -> None:
        """From now on `keys` are filled whole (a subscription's); those held cut are evicted
        here and below, for the subscription's lookup to fill them again."""
        for key in keys:
            self.whole[key] = self.whole.get(key, 0) + 1
        cut = [k for k in dict.fromkeys(keys) if k in self.bounds]
        if cut:
            self.evict_own(cut)

    def release_whole(self, keys: Collection[Key]) -> None:
        for key in keys:
            count = self.whole.get(key, 0) - 1
            if count > 0:
                self.whole[key] = count
            else:
                self.whole.pop(key, None)

    def keys_evicted(self, keys: Sequence[Key]) -> None:
        super().keys_evicted(keys)
        for key in keys:
            self.bounds.pop(key, None)

    def describe(self) -> str:
        keys = tuple(self.schema[c] for c in self.key_cols)
        order = ", ".join(f"{a}{' desc' if d else ''}" for a, d in self.source_order[: len(self.order)])
        where = "".join(f", {a} == {v!r}" for a, v in self.filters)
        return (
            f"SourceWindow({self.source} by {keys}{where}, first {self.limit} by {order}, partial): "
            f"{self.fills} fills fetched {self.fetched_rows} rows; {len(self.bounds)} keys cut; "
            f"{self.ran_short} ran short; {self.asked_again} fills asked again"
        )

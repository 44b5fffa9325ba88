"""TopK: the reader of an ordered view (`view v(k) order by a desc, b limit N`), Zero's
`Take` per key.

Contract:
- Input: the view's set delta. Output: none (a sink, as Reader).
- Order: each key's rows sorted by the order columns (each ascending or descending), ties
  broken by the whole row ascending, so that one set of rows has exactly one order.
- State, partial with a limit: at most `limit` rows per present key, the first in that
  order (the key's *window*). A key whose window left rows out (at its fill, or when an
  insert pushed the last row out) is *cut*: rows past its bound exist above and are not
  held here.
- On a delta: inserts enter the window and push its last rows out past `limit` (the key is
  then cut); inserts past the bound of a full window are not held. A delete inside the
  window of a cut key leaves a place only the rows above can fill. When the input is a
  state keyed as this one that keeps its rows in order (InOrder: a SourceIndex or a
  DistinctIncremental), the refill reads from its index the next rows past the bound, one
  more than the places (whether the key stays cut): a few rows, not the key. The fill of a
  cut key builds that index (operators/in_order.py), at about the cost of the cut it needs
  anyway. Otherwise (another input, or that state lacks the key) the key's rows are pulled
  from the input as it is after the step (`pull_in_step`, from the states above, never a
  fetch); when the states above lack them, the key is evicted and the next lookup fills it
  through the reader's one upquery. A delete of a row past a cut bound changes nothing here.
- Not linear (a window depends on the rows held); no state beside the window and the cut
  marks: the rows past the bound are the state above's.
- On a missing key: the delta is dropped (as every partial state).
- Full state (no key columns, `--full-state`), or no limit: every row is held, as in
  Reader, and a read sorts and cuts: a full state cannot be evicted to refill it.
- Taps (subscriptions) get the window's changes: the rows that enter and leave it. A tapped
  key is pinned, and nothing above a pinned reader is evicted, so its refills always answer.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from pomoview.dataflow.node import EvictCols, Node, group_by_key
from pomoview.dataflow.operators.in_order import InOrder
from pomoview.dataflow.operators.reader import Reader, Tap
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.upquery import pull_in_step, rows
from pomoview.dataflow.zset import ZSet

# (column, descending) per order attribute, in priority order.
OrderColumns = tuple[tuple[int, bool], ...]


class _Desc:
    """A value that sorts in reverse (for a descending column of any type)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __lt__(self, other: _Desc) -> bool:
        result: bool = other.value < self.value
        return result

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Desc) and self.value == other.value

    __hash__ = None  # type: ignore[assignment]


# Values a descending column negates (C comparisons; a column's values are all of its type,
# but for an int where a float is declared, both numbers): the others are wrapped in _Desc.
_NUMBERS = (int, float, bool)


def _descending(value: Any) -> Any:
    return -value if type(value) in _NUMBERS else _Desc(value)


def sort_key(order: OrderColumns) -> Any:
    """The sort key of a row in `order`, the whole row last (the tie break)."""
    columns = [(c, d) for c, d in order]

    def key(row: Row) -> tuple[Any, ...]:
        return (*[_descending(row[c]) if d else row[c] for c, d in columns], row)

    return key


def first_rows(rows: Iterable[Row], limit: int | None, key: Any) -> list[Row]:
    """The first `limit` of `rows` (None: all) in the order of `key`, sorted: a heap of
    `limit` when that is fewer than the rows (a key's refill takes 10 of thousands)."""
    rows = list(rows)
    if limit is None or limit >= len(rows):
        return sorted(rows, key=key)
    return heapq.nsmallest(limit, rows, key=key)


class _Hole:
    """A cut window a delete emptied a place in: the rows it still holds up to its `bound`
    (a sort key), with their weights; the rows after the bound are above."""

    __slots__ = ("known", "bound")

    def __init__(self, known: dict[Row, int], bound: Any) -> None:
        self.known = known
        self.bound = bound


class TopK(Reader):
    # Whether fills and refills use the index of the state above (InOrder): bench/
    # top_k_refill.py turns it off for a round, to time the pull of every row it replaces.
    ordered_refills = True

    def __init__(
        self,
        parent: Node,
        key_cols: tuple[int, ...],
        *,
        partial: bool,
        order: OrderColumns,
        limit: int | None,
    ) -> None:
        super().__init__(parent, key_cols, partial=partial)
        assert order, "a TopK has an order"
        assert limit is None or limit > 0, f"limit {limit}"
        self.order = order
        self.limit = limit
        self.sort_key = sort_key(order)
        # Present keys whose window left rows out (see the module docstring).
        self.cut: set[Key] = set()
        # Keys whose window a delete emptied a place in, refilled or evicted.
        self.refills = 0
        # Fills (upquery answers) and the rows they brought, before the cut.
        self.fills = 0
        self.pulled_rows = 0

    @property
    def windowed(self) -> bool:
        """Whether the state holds only each key's window (else every row, cut on read)."""
        return self.limit is not None and self.state.partial

    def rows_in_order(self, group: Mapping[Row, int]) -> list[Row]:
        return first_rows(group, self.limit, self.sort_key)

    def fill_key(self, key: Key, rows: Iterable[tuple[Row, int]]) -> None:
        held = [(row, weight) for row, weight in rows if weight]
        self._note((key,))
        self.fills += 1
        self.pulled_rows += len(held)
        if not self.windowed:
            super().fill_key(key, held)
            return
        assert self.limit is not None
        if len(held) > self.limit or self._cut_above(key):
            # The state above just answered with these rows: its index in this order is built
            # now, at the cost of the cut the window needs anyway, and answers the refills.
            first = self._in_order(key, None, self.limit)
            if first is None:
                first = first_rows((r for r, _ in held), self.limit, self.sort_key)
            held = [(row, 1) for row in first]
            self.cut.add(key)
        else:
            self.cut.discard(key)
        self.state.fill(key, held)

    def _cut_above(self, key: Key) -> bool:
        """Whether the state above holds only the first rows of `key` (a SourceWindow)."""
        parent = self.inputs[0]
        return isinstance(parent, InOrder) and parent.key_cols == self.key_cols and parent.cut_at(key)

    def tap(self, keys: Collection[Key], tap: Tap) -> None:
        super().tap(keys, tap)
        parent = self.inputs[0]
        if isinstance(parent, InOrder):
            # Invariant: a pinned key is held whole above (the subscription's lookup asked
            # for it whole, `want_whole`), so its refills always answer in the step.
            assert not any(parent.cut_at(k) for k in keys), f"tap of keys {keys} cut above"

    def untap(self, keys: Collection[Key], tap: Tap) -> None:
        super().untap(keys, tap)
        parent = self.inputs[0]
        if isinstance(parent, InOrder):
            parent.release_whole(keys)

    def want_whole(self, keys: Collection[Key]) -> None:
        """Before a subscription's lookup of `keys`: the state above holds them whole from
        now on (until `untap`), evicting those it holds cut, and here too."""
        parent = self.inputs[0]
        if isinstance(parent, InOrder):
            parent.hold_whole(keys)

    def _in_order(self, key: Key, after: Any | None, count: int) -> list[Row] | None:
        """Up to `count` rows of `key` after the sort key `after`, in order, from the index of
        the state above (InOrder) when that state is keyed as this one and holds `key`; else
        None (then only a pull of every row of the key can say them)."""
        parent = self.inputs[0]
        if not self.ordered_refills or not isinstance(parent, InOrder) or parent.key_cols != self.key_cols:
            return None
        return parent.rows_in_order(self.order, self.sort_key, key, after, count)

    def on_delta(self, port: int, delta: ZSet[Row]) -> ZSet[Row]:
        if not self.windowed:
            return super().on_delta(port, delta)
        by_key = self.by_key(delta)
        self._keep(by_key)  # before any group changes, as Reader
        state, refill = self.state, list[Key]()
        for key, changes in by_key.items():
            stored = state.peek(key)
            if stored is None:
                self.metrics.dropped += len(changes)
                continue
            self._note((key,))
            window = dict(state.view_of(key, stored))
            found = self._window(key, window, changes)
            new = self._refill_in_order(key, found) if isinstance(found, _Hole) else found
            if new is None:
                refill.append(key)
            else:
                self._put(key, window, new)
        if refill:
            self._refill(refill)
        return ZSet()

    def _put(self, key: Key, window: Mapping[Row, int], new: Mapping[Row, int]) -> None:
        """Replaces the key's window by `new`, handing its taps the rows that left and came."""
        diff = [(row, -w) for row, w in window.items() if row not in new]
        diff += [(row, w) for row, w in new.items() if window.get(row) != w]
        if diff:
            self.state.replace(key, diff)
            for tap in self.taps.get(key, ()):
                tap.capture(diff)

    def _refill_in_order(self, key: Key, hole: _Hole) -> dict[Row, int] | None:
        """The window of a cut key that a delete emptied a place in: the rows it still knows
        and the next rows past its old bound, read in order from the state above (one more
        than it needs: whether the key is still cut); None when the state above cannot say."""
        assert self.limit is not None
        need = self.limit - len(hole.known)
        got = self._in_order(key, hole.bound, need + 1)
        if got is None:
            return None
        # Invariant: a SourceWindow above evicts a cut key it holds fewer than `limit` rows of.
        assert len(got) >= need or not self._cut_above(key), f"{key!r}: {len(got)} rows past the bound"
        self.refills += 1
        self.pulled_rows += len(got)
        if len(got) <= need and not self._cut_above(key):
            self.cut.discard(key)
        new = dict(hole.known)
        new.update(dict.fromkeys(got[:need], 1))
        return new

    def _refill(self, keys: list[Key]) -> None:
        """Refills the windows of `keys` (a delete emptied a place in each, and the input keeps
        no order to read past the bound) with every row of the key pulled from the input, as
        it is after this step, when the states above hold them; else evicts them, and the
        next lookup fills them."""
        self.refills += len(keys)
        answer = pull_in_step(rows(self.inputs[0], self.key_cols, keys))
        if answer is None:
            # Invariant: a subscription's key is pinned, and nothing above a pinned reader is
            # evicted, so the states above still hold it and the pull answers.
            assert not any(k in self.taps for k in keys), f"TopK could not refill subscribed keys {keys}"
            self.evict_own(keys)
            return
        assert self.limit is not None
        grouped = group_by_key(answer.items(), self.key_cols, keys)
        for key in keys:
            pulled = [r for r, w in grouped.get(key, ()) if w > 0]
            self.pulled_rows += len(pulled)
            got = first_rows(pulled, self.limit, self.sort_key)
            if len(pulled) > self.limit:
                self.cut.add(key)
            else:
                self.cut.discard(key)
            window = dict(self.state.view_of(key, self.state.peek(key)))
            self._put(key, window, dict.fromkeys(got, 1))

    def _window(
        self, key: Key, window: dict[Row, int], changes: list[tuple[Row, int]]
    ) -> dict[Row, int] | _Hole:
        """The key's window after `changes`, or a _Hole when only the rows above can say it.

        A cut window holds exactly `limit` rows, and every row of the key up to its last
        one (the bound): what lies past the bound is unknown here. So after the changes
        the window is known when at least `limit` rows up to the old bound remain (a vote
        that moves a row within the window, or a delete matched by an insert before the
        bound); else a place is empty that a row past the bound may fill: a _Hole."""
        cut = key in self.cut
        new = dict(window)
        for row, weight in changes:
            if weight < 0 and row not in window:
                if not cut:  # a complete window holds every row: a delete of another is a bug
                    raise AssertionError(f"TopK delete of {row!r}, not in the complete window of {key!r}")
                continue  # past the bound: not held here
            total = new.get(row, 0) + weight
            if total > 0:
                new[row] = total
            else:
                new.pop(row, None)
        limit = self.limit
        assert limit is not None
        if cut:
            assert len(window) == limit, f"a cut window of {key!r} holds {len(window)} rows, not {limit}"
            bound = max(self.sort_key(row) for row in window)
            known = [row for row in new if not bound < self.sort_key(row)]
            if len(known) < limit:
                return _Hole({row: new[row] for row in known}, bound)
            return {row: new[row] for row in sorted(known, key=self.sort_key)[:limit]}
        if len(new) > limit:
            kept = first_rows(new, limit, self.sort_key)
            new = {row: new[row] for row in kept}
            self.cut.add(key)
        return new

    def on_evict(self, port: int, cols: EvictCols, keys: Collection[Key]) -> None:
        super().on_evict(port, cols, keys)
        self._forget_cut()

    def evict_own(self, keys: Collection[Key]) -> int:
        count = super().evict_own(keys)
        self.cut.difference_update(keys)
        return count

    def _forget_cut(self) -> None:
        """Drops the marks of keys an eviction from above took (which those are, only the
        state can say)."""
        if self.cut:
            peek = self.state.peek
            self.cut = {k for k in self.cut if peek(k) is not None}

    def describe(self) -> str:
        order = ", ".join(f"{self.schema[c]}{' desc' if d else ''}" for c, d in self.order)
        limit = "" if self.limit is None else f" limit {self.limit}"
        held = (
            f"at most {self.limit} rows per key (refills read the next rows in order from the state "
            "above, or pull the key from the states above, which hold every row of a present key)"
            if self.windowed
            else "every row, cut on read"
        )
        return (
            f"TopK(order by {order}{limit}){self.schema}: holds {held}; {self.fills} fills pulled "
            f"{self.pulled_rows} rows; {self.refills} refills after a delete in a window"
        )

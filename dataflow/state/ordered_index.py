"""OrderedIndex: the first rows of each key of a state in one order, for the TopK below it.

A TopK (dataflow/operators/top_k.py) holds a window of `limit` rows per key. When a delete
empties a place in the window of a key that left rows out, the rows past its bound are
above it. Without an order there, the refill would pull every row of the key and cut them
again (14,090 rows to refill one place for the hottest author of bench/top_k.py); with this
index, it takes the few rows that come next (Zero's `Take` asking its input for the rows
past its bound).

Per key the index holds a *prefix* of the key's rows in the order: the sort keys of the
first rows, sorted, and either `complete` (every row of the key is there) or up to a
`bound` (every row whose sort key is at most the bound is there, and no other). A prefix,
not every row: sorting a key of 14,000 rows costs about four heap cuts of its first rows,
and a key's window rarely needs more than a few refills, so the index holds about twice
what was asked, or √N rows of a key of N, and grows by doubling when a read runs past its
bound (`rows_after`, then `build` again).

Contract:
- Rows come from the owner's state, as a set: `build` reads a present key's rows with a
  positive weight; `apply` takes the owner's set delta (+1 a row became present, -1 absent).
- Exact: a prefix never misses a row of its range nor holds one outside it, so a read of
  the rows after a sort key is the state's, in order.
- Memory: about twice the rows asked, or √N, per key read in order, none for the others;
  an entry goes with its key (`drop`, on every eviction of the owner's key).
"""

from __future__ import annotations

import heapq
import math
import sys
from bisect import bisect_right, insort
from collections.abc import Callable, Collection, Mapping
from typing import Any

from pomoview.dataflow.state.keyed_state import Key, Row

SortKey = Callable[[Row], Any]

# A prefix trimmed back after inserts holds at most this many times what it was built for.
_SLACK = 2


class _Prefix:
    """One key's first rows in order: sorted sort keys (each ending with its row)."""

    __slots__ = ("entries", "bound", "size")

    def __init__(self, entries: list[Any], bound: Any | None, size: int) -> None:
        self.entries = entries
        self.bound = bound  # None: complete, every row of the key is in `entries`
        self.size = size  # how many rows it was built for

    def covers(self, sort_key: Any) -> bool:
        return self.bound is None or not self.bound < sort_key


class OrderedIndex:
    """The first rows of some keys in the order of `sort_key`; see the module docstring."""

    def __init__(self, sort_key: SortKey) -> None:
        self.sort_key = sort_key
        self._prefixes: dict[Key, _Prefix] = {}
        # Rows whose sort keys builds computed (a build reads every row of its key).
        self.built_rows = 0
        self.builds = 0

    def __contains__(self, key: Key) -> bool:
        return key in self._prefixes

    def keys(self) -> int:
        return len(self._prefixes)

    def held(self, key: Key) -> int:
        """How many rows of `key` its prefix holds (0: none)."""
        prefix = self._prefixes.get(key)
        return 0 if prefix is None else len(prefix.entries)

    def build(self, key: Key, group: Mapping[Row, int], size: int) -> None:
        """Indexes the first `size` rows of `key`, whose present rows are `group`'s rows of
        positive weight (a heap cut: every row's sort key once, no sort of them all)."""
        present = [row for row, weight in group.items() if weight > 0]
        # At least √rows: a build reads every row anyway, and a heap cut of the first 256
        # of 14,090 rows cost what one of 11 does (the sort keys dominate), so the prefix
        # lasts √N refills between two reads of the key, about √N rows a refill amortized.
        size = max(1, size, math.isqrt(len(present)))
        self.builds += 1
        self.built_rows += len(present)
        sort_key = self.sort_key
        if len(present) <= size:
            self._prefixes[key] = _Prefix(sorted(map(sort_key, present)), None, size)
            return
        first = heapq.nsmallest(size, map(sort_key, present))
        self._prefixes[key] = _Prefix(first, first[-1], size)

    def rows_after(self, key: Key, after: Any | None, count: int) -> list[Row] | None:
        """Up to `count` rows of `key` whose sort keys come after `after` (None: from the
        first), in order; None when the prefix ends before them (`build` it larger)."""
        prefix = self._prefixes[key]
        entries = prefix.entries
        start = 0 if after is None else bisect_right(entries, after)
        if prefix.bound is not None and start + count > len(entries):
            return None
        return [entry[-1] for entry in entries[start : start + count]]

    def size_for(self, key: Key, after: Any | None, count: int) -> int:
        """The size to build `key`'s prefix again with, for a read of `count` rows after
        `after` that it could not answer: double the last, and at least what the read
        reaches in the last (a guess when `after` lies past its bound: read again)."""
        prefix = self._prefixes.get(key)
        if prefix is None:
            return _SLACK * count
        reach = count + (0 if after is None else bisect_right(prefix.entries, after))
        return max(_SLACK * prefix.size, reach)

    def apply(self, changes: Mapping[Key, list[tuple[Row, int]]]) -> None:
        """The owner's set delta, grouped by key: the changes of indexed keys enter or leave
        their prefixes where the prefix's range holds them."""
        prefixes, sort_key = self._prefixes, self.sort_key
        for key, rows in changes.items():
            prefix = prefixes.get(key)
            if prefix is None:
                continue
            entries = prefix.entries
            for row, weight in rows:
                entry = sort_key(row)
                if not prefix.covers(entry):
                    continue
                if weight > 0:
                    insort(entries, entry)
                else:
                    at = bisect_right(entries, entry) - 1
                    assert at >= 0 and entries[at][-1] == row, f"ordered index lost {row!r} of {key!r}"
                    del entries[at]
            if prefix.bound is not None and len(entries) > _SLACK * prefix.size:
                # Inserts before the bound: the last rows go, and the bound comes down to the
                # last one kept (the range still holds every row up to it).
                del entries[prefix.size :]
                prefix.bound = entries[-1]

    def drop(self, keys: Collection[Key]) -> None:
        """Forgets `keys` (evicted from the owner: their rows are not followed any more)."""
        prefixes = self._prefixes
        if prefixes:
            for key in keys:
                prefixes.pop(key, None)

    def estimate_bytes(self) -> int:
        """The entries' tuples and list slots, sized from one entry (their rows are the
        owner's, counted there)."""
        total = sys.getsizeof(self._prefixes)
        count = 0
        sample: tuple[Any, ...] | None = None
        for prefix in self._prefixes.values():
            count += len(prefix.entries)
            if sample is None and prefix.entries:
                sample = prefix.entries[0]
        if sample is None:
            return total + 100 * len(self._prefixes)
        per_entry = 8 + sys.getsizeof(sample) + sum(sys.getsizeof(v) for v in sample[:-1])
        return total + 100 * len(self._prefixes) + count * per_entry

    def check(self, group_of: Callable[[Key], Mapping[Row, int] | None]) -> None:
        """Asserts every prefix against its key's rows in the owner's state (tests)."""
        for key, prefix in self._prefixes.items():
            group = group_of(key)
            assert group is not None, f"ordered index holds {key!r}, missing in its state"
            present = sorted(self.sort_key(r) for r, w in group.items() if w > 0)
            expected = [e for e in present if prefix.covers(e)]
            assert prefix.entries == expected, f"ordered index of {key!r} drifted"

"""Trace (PomoFlow §2.3): every delta a stream has carried, as (key, value, time, weight).

Layout: key -> value -> time -> weight, so a cursor walks by key, then value,
then time, and an operator that needs one key's history reads only that key.
An indexed ZSet is appended under its keys and values; a plain ZSet under its
elements as keys, with the value `None` (§2.3).

Partial-state ready (DESIGN §3): like `KeyedState`, a trace may be *partial*,
where each key is missing or present (present may be empty). A full trace
answers "empty" for a key it never saw; a partial one answers None ("missing")
until the key is filled. Appends to a missing key are refused (the caller drops
them and counts them).

Compaction: `advance_to(epoch)` lets the trace fold every time of an epoch
before `epoch - 1` onto `epoch - 1` (see `time.advance`). It is applied lazily,
to a (key, value) when it is next read or written, so its cost is proportional
to the work an epoch does anyway.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Hashable, Iterable, Iterator
from typing import Any

from pomoview.dataflow import time as timestamps
from pomoview.dataflow.time import Time
from pomoview.dataflow.zset import IndexedZSet, ZSet

Times = dict[Time, int]


def _sorted(items: Iterable[Hashable]) -> list[Hashable]:
    """Keys in their natural order when they have one, else in a stable order by type and repr."""
    items = list(items)
    try:
        return sorted(items)  # type: ignore[type-var]
    except TypeError:
        return sorted(items, key=lambda x: (type(x).__name__, repr(x)))


class TraceReader:
    """The read side of a trace: a key's values and their times, and what derives from them."""

    def values(self, key: Hashable) -> dict[Hashable, Times] | None:
        """The key's value -> time -> weight map; None when the key is missing; {} when empty."""
        raise NotImplementedError

    def keys(self) -> Iterator[Hashable]:
        raise NotImplementedError

    def times(self, key: Hashable, value: Hashable = None) -> Times:
        """The times at which (key, value) changed, with the weight of each change."""
        return (self.values(key) or {}).get(value, {})

    def weight(self, key: Hashable, value: Hashable = None, upto: Time | None = None) -> int:
        """The summed weight of (key, value) over times <= `upto` (product order), or over all time."""
        times = self.times(key, value)
        if upto is None:
            return sum(times.values())
        return sum(w for t, w in times.items() if timestamps.leq(t, upto))

    def cursor(self) -> Iterator[tuple[Hashable, Hashable, Time, int]]:
        """Every entry, by key, then value, then time (lexicographic)."""
        for key in _sorted(self.keys()):
            values = self.values(key) or {}
            for value in _sorted(values):
                for time in sorted(values[value]):
                    yield key, value, time, values[value][time]

    def consolidate(self) -> IndexedZSet[Hashable, Hashable]:
        """Consolidate (§2.9.2): the sum of all deltas, with zero weights dropped."""
        out: IndexedZSet[Hashable, Hashable] = IndexedZSet()
        for key in list(self.keys()):
            for value, times in (self.values(key) or {}).items():
                out.add(key, value, sum(times.values()))
        return out


class Trace(TraceReader):
    """A partial or full trace with lazy compaction of past epochs."""

    __slots__ = ("partial", "_keys", "_epoch", "_entries", "_order", "_touched")

    def __init__(self, *, partial: bool = False) -> None:
        self.partial = partial
        self._keys: dict[Hashable, dict[Hashable, Times]] = {}
        self._epoch = 0
        self._entries = 0
        # The keys in cursor order, kept until a key comes or goes, so that
        # repeated sequential reads cost no sort.
        self._order: list[Hashable] | None = None
        # epoch -> the (key, value) pairs that held entries at several times after an insert
        # of that epoch: once the epoch is below the compaction floor, `advance_to` compacts
        # them, so that changes which cancel out (a retraction at the iteration its row was
        # derived at) leave no entries behind even when nothing touches them again.
        self._touched: dict[int, set[tuple[Hashable, Hashable]]] = {}

    # -- presence (DESIGN §3) ------------------------------------------------------------

    def is_present(self, key: Hashable) -> bool:
        return not self.partial or key in self._keys

    def missing(self, keys: Iterable[Hashable]) -> list[Hashable]:
        if not self.partial:
            return []
        return [k for k in dict.fromkeys(keys) if k not in self._keys]

    def fill(self, key: Hashable, entries: Iterable[tuple[Hashable, Time, int]]) -> None:
        """Marks `key` present with exactly `entries` (value, time, weight): an upquery's answer."""
        # Invariant: a fill never overwrites a present key (Noria invariant 3).
        assert self.partial and key not in self._keys, f"fill of present key {key!r}"
        self._keys[key] = {}
        self._order = None
        for value, time, weight in entries:
            self.insert(key, value, time, weight)

    # -- writing ------------------------------------------------------------------------

    def advance_to(self, epoch: int) -> None:
        """Declares that no time of an epoch below `epoch` will be appended or asked about."""
        assert epoch >= self._epoch, (epoch, self._epoch)
        self._epoch = epoch
        ready = [e for e in self._touched if e < epoch - 1]
        for e in ready:
            for key, value in self._touched.pop(e):
                values = self._keys.get(key)
                times = None if values is None else values.get(value)
                if values is not None and times is not None and not self._compact(values, value, times):
                    del values[value]
                    if not values and not self.partial:
                        del self._keys[key]
                        self._order = None

    def insert(self, key: Hashable, value: Hashable, time: Time, weight: int) -> bool:
        """Adds one weighted entry; False (and no change) when the key is missing."""
        if weight == 0:
            return True
        values = self._keys.get(key)
        if values is None:
            if self.partial:
                return False
            values = self._keys[key] = {}
            self._order = None
        times = values.get(value)
        if times is None:
            times = values[value] = {}
        else:
            times = self._compact(values, value, times)
        time = timestamps.advance(time, self._epoch)
        old = times.get(time, 0)
        total = old + weight
        if total:
            times[time] = total
            if not old:
                self._entries += 1
                if len(times) > 1:
                    self._touched.setdefault(time[0], set()).add((key, value))
        else:
            del times[time]
            self._entries -= 1
            if not times:
                del values[value]
                if not values and not self.partial:
                    del self._keys[key]
                    self._order = None
        return True

    def append(self, batch: ZSet[Any] | IndexedZSet[Any, Any], time: Time) -> None:
        """TraceAppend (§2.9.16): merges `batch` into the trace at `time` (full traces only)."""
        if isinstance(batch, IndexedZSet):
            for key, group in batch.groups():
                for value, weight in group.items():
                    self.insert(key, value, time, weight)
        else:
            for element, weight in batch.items():
                self.insert(element, None, time, weight)

    def _compact(self, values: dict[Hashable, Times], value: Hashable, times: Times) -> Times:
        floor = self._epoch - 1
        if floor <= 0 or not any(t[0] < floor for t in times):
            return times
        merged: Times = {}
        for t, w in times.items():
            t = timestamps.advance(t, self._epoch)
            total = merged.get(t, 0) + w
            if total:
                merged[t] = total
            else:
                merged.pop(t, None)
        self._entries += len(merged) - len(times)
        values[value] = merged
        return merged

    # -- reading ------------------------------------------------------------------------

    def values(self, key: Hashable) -> dict[Hashable, Times] | None:
        values = self._keys.get(key)
        if values is None:
            return None if self.partial else {}
        for value, times in list(values.items()):
            if not self._compact(values, value, times):
                del values[value]  # its changes cancelled out once compacted
        return values

    def times(self, key: Hashable, value: Hashable = None) -> Times:
        values = self._keys.get(key)
        if values is None:
            return {}
        times = values.get(value)
        if times is None:
            return {}
        return self._compact(values, value, times)

    def keys(self) -> Iterator[Hashable]:
        return iter(self._keys)

    def cursor(self) -> Iterator[tuple[Hashable, Hashable, Time, int]]:
        if self._order is None:
            self._order = _sorted(self._keys)
        for key in list(self._order):
            values = self.values(key) or {}
            for value in _sorted(values):
                for time in sorted(values[value]):
                    yield key, value, time, values[value][time]

    def present_keys(self) -> int:
        return len(self._keys)

    def estimate_bytes(self, sample: int = 64) -> int:
        """The memory the trace holds, sized from its first `sample` keys and the first
        `sample // 8` values of each (values shared between entries are counted once per
        entry: an upper bound). A key of a closure holds thousands of values: visiting
        them all made the memory budget's check after every lookup cost seconds (the
        recursive lookup benchmark's 1,000 lookups: from 1 to 10 minutes)."""
        keys = self._keys
        key_bytes = keys_seen = entry_bytes = entries_seen = 0
        for key, values in itertools.islice(keys.items(), sample):
            keys_seen += 1
            key_bytes += _deep_size(key) + sys.getsizeof(values)
            for value, times in itertools.islice(values.items(), max(1, sample // 8)):
                entries_seen += len(times)
                entry_bytes += _deep_size(value) + sys.getsizeof(times) + sum(_deep_size(t) for t in times)
        total = sys.getsizeof(keys)
        if keys_seen:
            total += key_bytes * len(keys) // keys_seen
        if entries_seen:
            total += entry_bytes * self._entries // entries_seen
        return total

    def __len__(self) -> int:
        """The number of (key, value, time) entries."""
        return self._entries

    def __repr__(self) -> str:
        return f"Trace({list(self.cursor())!r})"


class TraceBefore(TraceReader):
    """A trace as it was before `time`: every entry except those at `time` itself.

    This is what Z1Trace (§2.9.9) hands on. Entries are only ever appended at the
    current time, so hiding them gives the previous time's trace without a copy.
    """

    __slots__ = ("trace", "time")

    def __init__(self, trace: Trace, time: Time) -> None:
        self.trace = trace
        self.time = time

    def values(self, key: Hashable) -> dict[Hashable, Times] | None:
        values = self.trace.values(key)
        if not values:
            return values
        out: dict[Hashable, Times] = {}
        for value, times in values.items():
            if self.time in times:
                times = {t: w for t, w in times.items() if t != self.time}
                if not times:
                    continue
            out[value] = times
        return out

    def times(self, key: Hashable, value: Hashable = None) -> Times:
        times = self.trace.times(key, value)
        if self.time in times:
            return {t: w for t, w in times.items() if t != self.time}
        return times

    def keys(self) -> Iterator[Hashable]:
        return self.trace.keys()

    def __repr__(self) -> str:
        return f"TraceBefore({self.time}, {list(self.cursor())!r})"


def _deep_size(value: object) -> int:
    """A value's bytes with a tuple's items (one level: rows and times are flat tuples)."""
    if type(value) is tuple:
        return sys.getsizeof(value) + sum(sys.getsizeof(v) for v in value)
    return sys.getsizeof(value)

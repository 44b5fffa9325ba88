"""Trace (PomoFlow §2.3): every delta a stream has carried, as (key, value, time, weight).

Read by key, then value, then time, so a cursor walks by key and an operator that needs one
key's history reads only that key. An indexed ZSet is appended under its keys and values; a
plain ZSet under its elements as keys, with the value `None` (§2.3).

Partial-state ready (DESIGN §3): like `KeyedState`, a trace may be *partial*, where each key
is missing or present (present may be empty). A full trace answers "empty" for a key it never
saw; a partial one answers None ("missing") until the key is filled. Appends to a missing key
are refused (the caller drops them and counts them).

Compaction: `advance_to(epoch)` lets the trace fold every time of an epoch before
`epoch - 1` onto `epoch - 1` (see `time.advance`), the *floor*. The trace keeps two parts:

* *settled*: the entries at or below the floor, stored without their epoch (it is the floor,
  whatever the floor is now), so that moving the floor rewrites nothing. Each (key, value)
  holds a `Code` (`encode`): the int `i` for the commonest entry of a closure, weight 1 at
  the iteration `i` of a one-level nested time, else a flat tuple of ints
  (inner time..., weight) per entry. A key whose only value is `None` (a plain ZSet's
  element) holds its code alone, without a dict. A derived pair of a closure costs a dict
  slot and a small int here, where a dict of values and a dict of times cost ~900 bytes.
* *recent*: the entries above the floor (the epoch being run), key -> value -> time ->
  weight, moved into settled when the floor passes them (`advance_to`, which a root Child
  calls as soon as its epoch is over: `settle`).

The operators over nested time (DistinctTrace, JoinTrace) read both parts of a key at once
(`Trace.histories`, `settled_values`, `recent_values`, through `nested_layout`) instead
of a dict of times built per value.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Hashable, Iterable, Iterator, Mapping
from typing import Any

from pomoview.dataflow.time import Time, leq
from pomoview.dataflow.zset import IndexedZSet, ZSet

Times = dict[Time, int]
Inner = tuple[int, ...]  # a time without its epoch
# A settled (key, value)'s entries at the floor (see the module's docstring and `encode`).
Code = int | tuple[int, ...]
_NO_TIMES: Times = {}


def _sorted(items: Iterable[Hashable]) -> list[Hashable]:
    """Keys in their natural order when they have one, else in a stable order by type and repr."""
    items = list(items)
    try:
        return sorted(items)  # type: ignore[type-var]
    except TypeError:
        return sorted(items, key=lambda x: (type(x).__name__, repr(x)))


def encode(entries: Mapping[Inner, int], depth: int) -> Code | None:
    """The code of settled entries (inner time -> weight, zeros allowed) of times `depth`
    long; None when every weight is zero. One entry of weight 1 at a one-level nested time
    (i,) is the int i; anything else the flat tuple (inner..., weight) per entry, by inner."""
    live = sorted((inner, w) for inner, w in entries.items() if w)
    if not live:
        return None
    if depth == 2 and len(live) == 1 and live[0][1] == 1:
        return live[0][0][0]
    return tuple(itertools.chain.from_iterable((*inner, w) for inner, w in live))


def decode(code: Code, depth: int) -> list[tuple[Inner, int]]:
    """The (inner time, weight) entries of `code` (the inverse of `encode`)."""
    if type(code) is int:
        return [((code,), 1)]
    assert isinstance(code, tuple)
    return [(code[k : k + depth - 1], code[k + depth - 1]) for k in range(0, len(code), depth)]


def code_size(code: Code, depth: int) -> int:
    """The number of entries `code` holds."""
    return 1 if type(code) is int else len(code) // depth  # type: ignore[arg-type]


def iteration_pairs(code: Code) -> list[tuple[int, int]] | tuple[tuple[int, int], ...]:
    """The (iteration, weight) entries of the code of settled (epoch, iteration) times."""
    if type(code) is int:
        return ((code, 1),)
    assert isinstance(code, tuple)
    return list(zip(code[0::2], code[1::2], strict=True))


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
        return sum(w for t, w in times.items() if leq(t, upto))

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
    """A partial or full trace, its past epochs settled compactly (see the module's docstring)."""

    __slots__ = ("partial", "depth", "_settled", "_recent", "_present", "_epoch", "_entries", "_order")

    def __init__(self, *, partial: bool = False) -> None:
        self.partial = partial
        self.depth = 0  # the length of its times, known from the first entry
        # key -> value -> code, or key -> code when the key's one value is None.
        self._settled: dict[Hashable, dict[Hashable, Code] | Code] = {}
        self._recent: dict[Hashable, dict[Hashable, Times]] = {}
        self._present: set[Hashable] = set()  # a partial trace's present keys
        self._epoch = 0
        self._entries = 0
        # The keys in cursor order, kept until a key comes or goes, so that
        # repeated sequential reads cost no sort.
        self._order: list[Hashable] | None = None

    @property
    def floor(self) -> int:
        """The epoch of every settled entry (-1: nothing is settled yet)."""
        return self._epoch - 1

    # -- presence (DESIGN §3) ------------------------------------------------------------

    def is_present(self, key: Hashable) -> bool:
        return not self.partial or key in self._present

    def missing(self, keys: Iterable[Hashable]) -> list[Hashable]:
        if not self.partial:
            return []
        return [k for k in dict.fromkeys(keys) if k not in self._present]

    def fill(self, key: Hashable, entries: Iterable[tuple[Hashable, Time, int]]) -> None:
        """Marks `key` present with exactly `entries` (value, time, weight): an upquery's answer."""
        # Invariant: a fill never overwrites a present key (Noria invariant 3).
        assert self.partial and key not in self._present, f"fill of present key {key!r}"
        self._present.add(key)
        self._order = None
        for value, time, weight in entries:
            self.insert(key, value, time, weight)

    # -- writing ------------------------------------------------------------------------

    def advance_to(self, epoch: int) -> None:
        """Declares that no time of an epoch below `epoch` will be appended or asked about:
        every recent entry at or below the new floor moves into settled."""
        if epoch == self._epoch:
            return
        assert epoch > self._epoch, (epoch, self._epoch)
        self._epoch = epoch
        floor = epoch - 1
        recent = self._recent
        kept: dict[Hashable, dict[Hashable, Times]] = {}
        for key, values in recent.items():
            if self.depth == 2 and key not in self._settled:
                values = self._settle_new_key(key, values, floor)
            for value, times in values.items():
                later: Times = {}
                inner: dict[Inner, int] = {}
                for t, w in times.items():
                    if t[0] > floor:
                        later[t] = w
                    else:
                        i = t[1:]
                        inner[i] = inner.get(i, 0) + w
                self._entries -= len(times) - len(later)
                if inner:
                    self._settle(key, value, inner)
                if later:
                    kept.setdefault(key, {})[value] = later
        self._recent = kept
        if not self.partial:
            self._order = None

    def insert(self, key: Hashable, value: Hashable, time: Time, weight: int) -> bool:
        """Adds one weighted entry; False (and no change) when the key is missing."""
        if weight == 0:
            return True
        if self.partial and key not in self._present:
            return False
        if not self.depth:
            self.depth = len(time)
        if time[0] <= self._epoch - 1:  # folds onto the floor
            self._settle(key, value, {time[1:]: weight})
            return True
        values = self._recent.get(key)
        if values is None:
            if key not in self._settled:
                self._order = None
            values = self._recent[key] = {}
        times = values.get(value)
        if times is None:
            values[value] = {time: weight}
            self._entries += 1
            return True
        total = times.get(time, 0) + weight
        if total:
            if time not in times:
                self._entries += 1
            times[time] = total
        else:
            del times[time]
            self._entries -= 1
            if not times:
                del values[value]
                if not values:
                    del self._recent[key]
                    self._order = None
        return True

    def append(self, batch: ZSet[Any] | IndexedZSet[Any, Any], time: Time) -> None:
        """TraceAppend (§2.9.16): merges `batch` into the trace at `time` (full traces only)."""
        if self.partial or time[0] <= self._epoch - 1 or not batch:
            for key, value, weight in _rows(batch):
                self.insert(key, value, time, weight)
            return
        if not self.depth:
            self.depth = len(time)
        if isinstance(batch, IndexedZSet):
            self._append_indexed(batch, time)
            return
        # The common case of a nested circuit's epoch, inlined: an element new to the epoch.
        recent, settled = self._recent, self._settled
        added = 0
        for element, weight in batch.items():
            values = recent.get(element)
            if values is not None:
                times = values.get(None)
                if times is not None and time not in times:  # derived again, at a new time
                    times[time] = weight
                    added += 1
                else:
                    self.insert(element, None, time, weight)
                continue
            recent[element] = {None: {time: weight}}
            added += 1
            if element not in settled:
                self._order = None
        self._entries += added

    def _append_indexed(self, batch: IndexedZSet[Any, Any], time: Time) -> None:
        """`append` of an indexed batch above the floor: a key's values found once, and a
        value new at `time` added without `insert`."""
        recent = self._recent
        added = 0
        for key, group in batch.groups():
            values = recent.get(key)
            if values is None:
                values = recent[key] = {}
                if key not in self._settled:
                    self._order = None
            for value, weight in group.items():
                times = values.get(value)
                if times is None:
                    values[value] = {time: weight}
                    added += 1
                elif time not in times:
                    times[time] = weight
                    added += 1
                elif times[time] + weight:
                    times[time] += weight
                else:
                    del times[time]
                    added -= 1
                    if not times:
                        del values[value]
            if not values:  # every value it held cancelled out
                del recent[key]
                self._order = None
        self._entries += added

    def _settle_new_key(
        self, key: Hashable, values: dict[Hashable, Times], floor: int
    ) -> dict[Hashable, Times]:
        """Settles the values of a key with nothing settled yet, at (epoch, iteration) times,
        with no decode and merge (what `advance_to` does for most keys); returns the values
        with times above `floor`, for the general path."""
        codes: dict[Hashable, Code] = {}
        rest: dict[Hashable, Times] = {}
        for value, times in values.items():
            if len(times) == 1:
                ((t, w),) = times.items()
                if t[0] <= floor:
                    codes[value] = t[1] if w == 1 else (t[1], w)
                    continue
            elif max(times)[0] <= floor:
                # A closure's element derived at several iterations: the flat code built
                # here, without `encode`'s tuples of inner times (settling cost 40% of the
                # bench's first epoch).
                sums: dict[int, int] = {}
                for t, w in times.items():
                    sums[t[1]] = sums.get(t[1], 0) + w
                live = sorted(item for item in sums.items() if item[1])
                self._entries -= len(times) - len(live)
                if len(live) == 1 and live[0][1] == 1:
                    codes[value] = live[0][0]
                elif live:
                    codes[value] = tuple(itertools.chain.from_iterable(live))
                continue
            rest[value] = times
        if codes:
            self._settled[key] = codes[None] if len(codes) == 1 and None in codes else codes
        return rest

    def _settle(self, key: Hashable, value: Hashable, entries: dict[Inner, int]) -> None:
        """Adds `entries` (inner time -> weight) to the settled entries of (key, value)."""
        settled = self._settled
        held = settled.get(key)
        if held is None:
            values: dict[Hashable, Code] = {}
        elif type(held) is dict:
            values = held
        else:
            values = {None: held}  # type: ignore[dict-item]
        old = values.get(value)
        if old is not None:
            self._entries -= code_size(old, self.depth)
            for inner, w in decode(old, self.depth):
                entries[inner] = entries.get(inner, 0) + w
        code = encode(entries, self.depth)
        if code is None:
            values.pop(value, None)
        else:
            values[value] = code
            self._entries += code_size(code, self.depth)
        if not values:
            if held is not None:
                del settled[key]
                self._order = None
        elif len(values) == 1 and None in values:
            settled[key] = values[None]
        else:
            settled[key] = values
        if held is None and values and key not in self._recent:
            self._order = None

    # -- reading ------------------------------------------------------------------------

    def settled_values(self, key: Hashable) -> Mapping[Hashable, Code]:
        """The key's settled values and their codes (at the floor), read only."""
        held = self._settled.get(key)
        if held is None:
            return {}
        return held if type(held) is dict else {None: held}  # type: ignore[return-value,dict-item]

    def settled_code(self, key: Hashable, value: Hashable = None) -> Code | None:
        held = self._settled.get(key)
        if type(held) is dict:
            return held.get(value)  # type: ignore[no-any-return]
        return held if value is None else None  # type: ignore[return-value]

    def histories(self, keys: Iterable[Hashable]) -> Iterator[tuple[Hashable, Code | None, Times]]:
        """For each of `keys`: its value None's settled code (or None) and recent times (read
        only): a plain ZSet's elements' histories in one pass, for DistinctTrace."""
        settled, recent = self._settled, self._recent
        for key in keys:
            held = settled.get(key)
            code = held.get(None) if type(held) is dict else held
            assert not isinstance(code, dict)
            values = recent.get(key)
            yield key, code, (values.get(None) or _NO_TIMES) if values is not None else _NO_TIMES

    def recent_values(self, key: Hashable) -> Mapping[Hashable, Times]:
        """The key's recent values and their times (above the floor), read only."""
        return self._recent.get(key) or {}

    def recent_times(self, key: Hashable, value: Hashable = None) -> Times:
        values = self._recent.get(key)
        if values is None:
            return _NO_TIMES
        return values.get(value) or _NO_TIMES

    def values(self, key: Hashable) -> dict[Hashable, Times] | None:
        if self.partial and key not in self._present:
            return None
        floor = (self._epoch - 1,)
        out: dict[Hashable, Times] = {
            value: {floor + inner: w for inner, w in decode(code, self.depth)}
            for value, code in self.settled_values(key).items()
        }
        for value, times in self.recent_values(key).items():
            out.setdefault(value, {}).update(times)  # recent times are above the floor
        return out

    def times(self, key: Hashable, value: Hashable = None) -> Times:
        code = self.settled_code(key, value)
        recent = self.recent_times(key, value)
        if code is None:
            return dict(recent)
        floor = (self._epoch - 1,)
        out = {floor + inner: w for inner, w in decode(code, self.depth)}
        out.update(recent)
        return out

    def keys(self) -> Iterator[Hashable]:
        if self.partial:
            return iter(self._present)
        return iter(self._settled.keys() | self._recent.keys())

    def cursor(self) -> Iterator[tuple[Hashable, Hashable, Time, int]]:
        if self._order is None:
            self._order = _sorted(self.keys())
        for key in list(self._order):
            values = self.values(key) or {}
            for value in _sorted(values):
                for time in sorted(values[value]):
                    yield key, value, time, values[value][time]

    def present_keys(self) -> int:
        if self.partial:
            return len(self._present)
        return len(self._settled.keys() | self._recent.keys())

    def estimate_bytes(self, sample: int = 64) -> int:
        """The memory the trace holds, sized from its first `sample` keys of each part and the
        first `sample // 8` values of each such key (values shared between entries are counted
        once per entry: an upper bound). A key of a closure holds thousands of values: visiting
        them all made the memory budget's check after every lookup cost seconds (the recursive
        lookup benchmark's 1,000 lookups: from 1 to 10 minutes)."""
        total = sys.getsizeof(self._settled) + sys.getsizeof(self._recent) + sys.getsizeof(self._present)
        per_value = max(1, sample // 8)
        value_bytes = values_seen = entries_seen = containers = values_in_sampled = 0
        for part in (self._settled, self._recent):
            sampled = list(itertools.islice(part.items(), sample))
            key_bytes = 0
            for key, held in sampled:
                key_bytes += _deep_size(key)
                if type(held) is dict:
                    containers += sys.getsizeof(held)
                    values_in_sampled += len(held)
                    pairs: Iterable[tuple[Hashable, Any]] = held.items()
                else:  # a settled key whose one value is None: its code alone
                    values_in_sampled += 1
                    pairs = [(None, held)]
                for value, code in itertools.islice(pairs, per_value):
                    values_seen += 1
                    entries_seen += len(code) if type(code) is dict else code_size(code, self.depth)
                    value_bytes += (0 if value is None else _deep_size(value)) + _code_bytes(code)
            if sampled:
                total += key_bytes * len(part) // len(sampled)
        if entries_seen:
            total += value_bytes * self._entries // entries_seen
            # A key's dict grows with its values, and one key may hold most of them: the
            # dicts are sized per value, not per key.
            values = self._entries * values_seen / entries_seen
            total += int(containers * values / values_in_sampled)
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


def nested_layout(reader: TraceReader, time: Time) -> tuple[Trace, Time | None] | None:
    """The trace under `reader` and the time it hides, when an operator at `time`, an
    (epoch, iteration), may read the two parts of its layout directly: its times are
    (epoch, iteration) too, and the floor lies below `time`'s epoch (it always does in a
    circuit: the floor is the epoch before the one running), so that every settled entry is
    earlier and every hidden one recent. None otherwise (read `times` and `values`)."""
    if isinstance(reader, TraceBefore):
        trace, hidden = reader.trace, reader.time
    elif isinstance(reader, Trace):
        trace, hidden = reader, None
    else:
        return None
    if len(time) != 2 or trace.depth not in (0, 2) or trace.floor >= time[0]:
        return None
    if hidden is not None and hidden[0] <= trace.floor:
        return None
    return trace, hidden


def _rows(batch: ZSet[Any] | IndexedZSet[Any, Any]) -> Iterator[tuple[Hashable, Hashable, int]]:
    """A batch's (key, value, weight) entries: a plain ZSet's elements are keys with value None."""
    if isinstance(batch, IndexedZSet):
        for key, group in batch.groups():
            for value, weight in group.items():
                yield key, value, weight
    else:
        for element, weight in batch.items():
            yield element, None, weight


def _code_bytes(code: Code | Times) -> int:
    if type(code) is dict:  # a recent value's times
        return sys.getsizeof(code) + sum(_deep_size(t) for t in code)
    if type(code) is int and -5 <= code <= 256:
        return 0  # CPython's small ints are shared
    return _deep_size(code)


def _deep_size(value: object) -> int:
    """A value's bytes with a tuple's items (one level: rows and times are flat tuples)."""
    if type(value) is tuple:
        return sys.getsizeof(value) + sum(sys.getsizeof(v) for v in value)
    return sys.getsizeof(value)

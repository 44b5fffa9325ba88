"""Trace (PomoFlow §2.3): every delta a stream has carried, as (key, value, time, weight).

Read by key, then value, then time, so a cursor walks by key and an operator that needs one
key's history reads only that key. An indexed ZSet is appended under its keys and values; a
plain ZSet under its elements as keys, with the value `None` (§2.3).

Partial-state ready (DESIGN §3): like `KeyedState`, a trace may be *partial*, where each key
is missing or present (present may be empty). A full trace answers "empty" for a key it never
saw; a partial one answers None ("missing") until the key is filled. Appends to a missing key
are refused (the caller drops them and counts them).

Compaction: `advance_to(epoch)` lets the trace fold every time of an epoch before
`epoch - 1` onto `epoch - 1` (see `time.advance`), the *floor*. The trace keeps three parts:

* *settled*: the entries at or below the floor, stored without their epoch (it is the floor,
  whatever the floor is now), so that moving the floor rewrites nothing. Each (key, value)
  holds a `Code` (`encode`): the int `i` for the commonest entry of a closure, weight 1 at
  the iteration `i` of a one-level nested time, else a flat tuple of ints
  (inner time..., weight) per entry. A key whose only value is `None` (a plain ZSet's
  element) holds its code alone, without a dict. A derived pair of a closure costs a dict
  slot and a small int here, where a dict of values and a dict of times cost ~900 bytes.
* *recent*: the entries of the epoch after the floor (`recent_epoch`, the epoch being run),
  in the same shape and codes, its epoch left out too. When the floor passes it
  (`advance_to`, which a root Child calls as soon as its epoch is over: `settle`), its codes
  merge into settled's, and a key that has none there moves as it is: settling a
  hydration's epoch moves the whole part. (Kept as dicts of times, the epoch's entries cost
  ~400 bytes each until they settled, and settling them 40% of a closure's first epoch.)
* *later*: entries of epochs after the recent one, key -> value -> time -> weight. An
  operator never writes ahead of the epoch it runs (TraceAppend advances first); a caller
  may, and such entries come down into recent or settled as the floor moves.

The operators over nested time (DistinctTrace, JoinTrace) read the settled and recent codes
of a key at once (`Trace.histories`, `settled_values`, `recent_values`, through
`nested_layout`, which refuses a trace that writes ahead) instead of a dict of times built
per value.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Hashable, Iterable, Iterator, Mapping
from typing import Any

from pomoview.dataflow.time import Time, leq
from pomoview.dataflow.trace_codes import Code, Inner, code_size, decode, merge_codes, one_code
from pomoview.dataflow.zset import IndexedZSet, ZSet

Times = dict[Time, int]
_NO_TIMES: Times = {}


def _sorted(items: Iterable[Hashable]) -> list[Hashable]:
    """Keys in their natural order when they have one, else in a stable order by type and repr."""
    items = list(items)
    try:
        return sorted(items)  # type: ignore[type-var]
    except TypeError:
        return sorted(items, key=lambda x: (type(x).__name__, repr(x)))


class Part(dict):  # type: ignore[type-arg]
    """A part of a trace (settled or recent): a dict the collector never untracks.

    CPython's full collections untrack an exact dict whose keys and values are all untracked
    (ints, and tuples of ints once a collection has seen them): a closure's part, millions of
    entries, after every full collection. The next entry of a tuple made since (a new code, a
    new row) tracks it again, as a young object, so the next two young collections each
    walked all of it (bench/transitive_closure.py at 2,000 nodes: 276 + 267 ms in a one-edge
    update of ~100 ms). A subclass is never untracked: it stays in the oldest generation."""

    __slots__ = ()


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

    __slots__ = (
        "partial", "depth", "_settled", "_recent", "_later", "_present", "_epoch", "_entries", "_n_recent",
        "_n_later", "_order",
    )

    def __init__(self, *, partial: bool = False) -> None:
        self.partial = partial
        self.depth = 0  # the length of its times, known from the first entry
        # Two parts of one shape, key -> value -> code (or key -> code when the key's one
        # value is None): settled at the floor, recent at the epoch after it.
        self._settled: dict[Hashable, dict[Hashable, Code] | Code] = Part()
        self._recent: dict[Hashable, dict[Hashable, Code] | Code] = Part()
        self._later: dict[Hashable, dict[Hashable, Times]] = {}  # epochs after the recent one
        self._present: set[Hashable] = set()  # a partial trace's present keys
        self._epoch = 0  # the recent entries' epoch; the floor is the one before it
        self._entries = 0  # in all three parts
        self._n_recent = self._n_later = 0  # in recent, in later
        # The keys in cursor order, kept until a key comes or goes, so that
        # repeated sequential reads cost no sort.
        self._order: list[Hashable] | None = None

    @property
    def floor(self) -> int:
        """The epoch of every settled entry (-1: nothing is settled yet)."""
        return self._epoch - 1

    @property
    def recent_epoch(self) -> int:
        """The epoch of every recent entry: the one after the floor."""
        return self._epoch

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
        the recent entries fold onto the new floor (a part moved whole where the settled
        one is empty, as after a hydration's epoch; else a key at a time), and the later
        entries of epochs up to `epoch` come down."""
        if epoch == self._epoch:
            return
        assert epoch > self._epoch, (epoch, self._epoch)
        self._epoch = epoch
        recent, self._recent = self._recent, Part()
        settled = self._settled
        if not settled:
            self._settled = recent
        else:
            for key, held in recent.items():
                if key not in settled:
                    settled[key] = held
                    continue
                for value, code in _values_of(recent, key).items():
                    self._entries -= code_size(code, self.depth)  # counted again by _merge
                    self._merge(settled, key, value, code)
        self._n_recent = 0
        if self._later:
            later, self._later = self._later, {}
            self._entries -= self._n_later  # counted again by insert
            self._n_later = 0
            for key, values in later.items():
                for value, times in values.items():
                    for t, w in times.items():
                        self.insert(key, value, t, w)
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
        if time[0] < self._epoch:  # folds onto the floor
            self._merge(self._settled, key, value, one_code(time[1:], weight, self.depth))
        elif time[0] == self._epoch:
            self._merge(self._recent, key, value, one_code(time[1:], weight, self.depth))
        else:
            self._insert_later(key, value, time, weight)
        return True

    def _insert_later(self, key: Hashable, value: Hashable, time: Time, weight: int) -> None:
        """An entry of an epoch after the recent one (no operator writes ahead: a caller may)."""
        values = self._later.get(key)
        if values is None:
            values = self._later[key] = {}
            self._order = None
        times = values.setdefault(value, {})
        total = times.get(time, 0) + weight
        if total:
            new = time not in times
            self._entries += new
            self._n_later += new
            times[time] = total
            return
        del times[time]
        self._entries -= 1
        self._n_later -= 1
        if not times:
            del values[value]
            if not values:
                del self._later[key]
                self._order = None

    def _merge(self, part: dict[Hashable, Any], key: Hashable, value: Hashable, code: Code) -> None:
        """Adds the entries of `code` to (key, value) in `part` (settled or recent)."""
        depth = self.depth
        held = part.get(key)
        if held is None:
            part[key] = code if value is None else {value: code}
            self._count(part, code_size(code, depth))
            self._order = None
            return
        values: dict[Hashable, Code] = held if type(held) is dict else {None: held}
        old = values.get(value)
        change = 0
        if old is None:
            merged: Code | None = code
        else:
            change -= code_size(old, depth)
            merged = merge_codes(old, code, depth)
        if merged is None:
            del values[value]
        else:
            values[value] = merged
            change += code_size(merged, depth)
        self._count(part, change)
        if not values:
            del part[key]
            self._order = None
        elif len(values) == 1 and None in values:
            part[key] = values[None]
        else:
            part[key] = values

    def _count(self, part: dict[Hashable, Any], change: int) -> None:
        self._entries += change
        if part is self._recent:
            self._n_recent += change

    def append(self, batch: ZSet[Any] | IndexedZSet[Any, Any], time: Time) -> None:
        """TraceAppend (§2.9.16): merges `batch` into the trace at `time` (full traces only)."""
        if self.partial or time[0] != self._epoch or not batch:
            for key, value, weight in _rows(batch):
                self.insert(key, value, time, weight)
            return
        if not self.depth:
            self.depth = len(time)
        inner, depth = time[1:], self.depth
        if isinstance(batch, IndexedZSet):
            self._append_indexed(batch, inner)
            return
        # The common case of a nested circuit's epoch, inlined: an element new to the epoch,
        # stored as its code (at one-level nesting and weight 1, the iteration's int).
        if depth != 2:
            for element, weight in batch.items():
                if weight:
                    self._merge(self._recent, element, None, (*inner, weight))
            return
        recent, settled = self._recent, self._settled
        (i,) = inner
        added = 0
        for element, weight in batch.items():
            if not weight:
                continue
            held = recent.get(element)
            if held is None:
                recent[element] = i if weight == 1 else (i, weight)
                if element not in settled:
                    self._order = None
            # Derived again at a later iteration (they come in order): the entry goes last.
            elif type(held) is int and held < i:
                recent[element] = (held, 1, i, weight)
            elif type(held) is tuple and held[-2] < i:
                recent[element] = held + (i, weight)
            else:
                self._merge(recent, element, None, i if weight == 1 else (i, weight))
                continue
            added += 1
        self._entries += added
        self._n_recent += added

    def _append_indexed(self, batch: IndexedZSet[Any, Any], inner: Inner) -> None:
        """`append` of an indexed batch at the recent epoch: a key new to the epoch takes its
        values' codes in one dict, without `_merge`."""
        recent, settled, depth = self._recent, self._settled, self.depth
        for key, group in batch.groups():
            held = recent.get(key)
            if held is not None:
                added = 0
                for value, weight in group.items():
                    if not weight:
                        continue
                    if type(held) is dict and value not in held and value is not None:
                        held[value] = one_code(inner, weight, depth)  # new to the key: no merge
                        added += 1
                    else:
                        self._merge(recent, key, value, one_code(inner, weight, depth))
                        held = recent.get(key)
                self._entries += added
                self._n_recent += added
                continue
            codes = {value: one_code(inner, weight, depth) for value, weight in group.items() if weight}
            if not codes:
                continue
            recent[key] = codes[None] if len(codes) == 1 and None in codes else codes
            self._entries += len(codes)
            self._n_recent += len(codes)
            if key not in settled:
                self._order = None

    # -- reading ------------------------------------------------------------------------

    def settled_values(self, key: Hashable) -> Mapping[Hashable, Code]:
        """The key's settled values and their codes (at the floor), read only."""
        return _values_of(self._settled, key)

    def settled_code(self, key: Hashable, value: Hashable = None) -> Code | None:
        return _code_of(self._settled, key, value)

    def recent_values(self, key: Hashable) -> Mapping[Hashable, Code]:
        """The key's recent values and their codes (at `recent_epoch`), read only."""
        return _values_of(self._recent, key)

    def recent_code(self, key: Hashable, value: Hashable = None) -> Code | None:
        return _code_of(self._recent, key, value)

    def later_times(self, key: Hashable, value: Hashable = None) -> Times:
        """The entries of (key, value) at epochs after the recent one."""
        return self._later.get(key, {}).get(value) or _NO_TIMES

    def writes_ahead(self) -> bool:
        """Whether it holds entries of an epoch after the recent one."""
        return bool(self._later)

    def histories(self, keys: Iterable[Hashable]) -> Iterator[tuple[Hashable, Code | None, Code | None]]:
        """For each of `keys`: its value None's settled code and recent code (or None): a
        plain ZSet's elements' histories in one pass, for DistinctTrace."""
        settled, recent = self._settled, self._recent
        for key in keys:
            held = settled.get(key)
            code = held.get(None) if type(held) is dict else held
            held = recent.get(key)
            yield key, code, held.get(None) if type(held) is dict else held  # type: ignore[misc]

    def values(self, key: Hashable) -> dict[Hashable, Times] | None:
        if self.partial and key not in self._present:
            return None
        floor, epoch, depth = (self._epoch - 1,), (self._epoch,), self.depth
        out: dict[Hashable, Times] = {
            value: {floor + inner: w for inner, w in decode(code, depth)}
            for value, code in self.settled_values(key).items()
        }
        for value, code in self.recent_values(key).items():
            out.setdefault(value, {}).update((epoch + inner, w) for inner, w in decode(code, depth))
        for value, times in self._later.get(key, {}).items():
            out.setdefault(value, {}).update(times)
        return out

    def times(self, key: Hashable, value: Hashable = None) -> Times:
        out: Times = {}
        settled, recent = self.settled_code(key, value), self.recent_code(key, value)
        for at, code in ((self._epoch - 1, settled), (self._epoch, recent)):
            if code is not None:
                out.update(((at,) + inner, w) for inner, w in decode(code, self.depth))
        out.update(self.later_times(key, value))
        return out

    def keys(self) -> Iterator[Hashable]:
        if self.partial:
            return iter(self._present)
        return iter(self._settled.keys() | self._recent.keys() | self._later.keys())

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
        return len(self._settled.keys() | self._recent.keys() | self._later.keys())

    def estimate_bytes(self, sample: int = 64) -> int:
        """The memory the trace holds, sized from its first `sample` keys of each part and the
        first `sample // 8` values of each such key (values shared between entries are counted
        once per entry: an upper bound). A key of a closure holds thousands of values: visiting
        them all made the memory budget's check after every lookup cost seconds (the recursive
        lookup benchmark's 1,000 lookups: from 1 to 10 minutes)."""
        total = sum(map(sys.getsizeof, (self._settled, self._recent, self._later, self._present)))
        parts: tuple[dict[Hashable, Any], ...] = (self._settled, self._recent, self._later)
        for part, entries in zip(parts, self.entries_by_part(), strict=True):
            total += self._part_bytes(part, entries, sample)
        return total

    def _part_bytes(self, part: dict[Hashable, Any], entries: int, sample: int) -> int:
        """`estimate_bytes` of one part holding `entries` entries (its parts differ in cost
        per entry: a code, or a dict of times)."""
        sampled = list(itertools.islice(part.items(), sample))
        if not sampled:
            return 0
        per_value = max(1, sample // 8)
        key_bytes = value_bytes = values_seen = entries_seen = containers = values_in_sampled = 0
        for key, held in sampled:
            key_bytes += _deep_size(key)
            if type(held) is dict:
                containers += sys.getsizeof(held)
                values_in_sampled += len(held)
                pairs: Iterable[tuple[Hashable, Any]] = held.items()
            else:  # a key whose one value is None: its code alone
                values_in_sampled += 1
                pairs = [(None, held)]
            for value, code in itertools.islice(pairs, per_value):
                values_seen += 1
                entries_seen += len(code) if type(code) is dict else code_size(code, self.depth)
                value_bytes += (0 if value is None else _deep_size(value)) + _code_bytes(code)
        total = key_bytes * len(part) // len(sampled)
        if entries_seen:
            total += value_bytes * entries // entries_seen
            # A key's dict grows with its values, and one key may hold most of them: the
            # dicts are sized per value, not per key.
            values = entries * values_seen / entries_seen
            total += int(containers * values / values_in_sampled)
        return total

    def entries_by_part(self) -> tuple[int, int, int]:
        """The entries settled, recent and later (kept as they change: `estimate_bytes` sizes
        each part by its own)."""
        return self._entries - self._n_recent - self._n_later, self._n_recent, self._n_later

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
    earlier and every hidden one recent, and no entry lies ahead of the recent epoch. None
    otherwise (read `times` and `values`)."""
    if isinstance(reader, TraceBefore):
        trace, hidden = reader.trace, reader.time
    elif isinstance(reader, Trace):
        trace, hidden = reader, None
    else:
        return None
    if len(time) != 2 or trace.depth not in (0, 2) or trace.floor >= time[0] or trace.writes_ahead():
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
    if type(code) is dict:  # a later value's times
        return sys.getsizeof(code) + sum(_deep_size(t) for t in code)
    if type(code) is int and -5 <= code <= 256:
        return 0  # CPython's small ints are shared
    return _deep_size(code)


def _deep_size(value: object) -> int:
    """A value's bytes with a tuple's items (one level: rows and times are flat tuples)."""
    if type(value) is tuple:
        return sys.getsizeof(value) + sum(sys.getsizeof(v) for v in value)
    return sys.getsizeof(value)


def _values_of(part: Mapping[Hashable, Any], key: Hashable) -> Mapping[Hashable, Code]:
    """A key's values and their codes in one part (settled or recent) of a trace."""
    held = part.get(key)
    if held is None:
        return {}
    return held if type(held) is dict else {None: held}  # type: ignore[no-any-return]


def _code_of(part: Mapping[Hashable, Any], key: Hashable, value: Hashable) -> Code | None:
    held = part.get(key)
    if type(held) is dict:
        return held.get(value)  # type: ignore[no-any-return]
    return held if value is None else None  # type: ignore[no-any-return]

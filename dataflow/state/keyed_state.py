"""Operator state keyed by a tuple of columns, where a key can be *missing*.

DESIGN §3: every state is a map key -> rows, each key missing or present
(present may be empty). A *full* state has every key present, so a lookup of a
key it never saw answers "empty"; a *partial* state answers None ("missing")
until the key is filled by an upquery. Writes that meet a missing key are
dropped by the caller (Noria invariant 2, no partial updates).
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterable, Iterator, Mapping

from pomoview.dataflow.state.int_set import IntSet, fits
from pomoview.dataflow.state.packed_presence import packed_presence
from pomoview.dataflow.zset import ZSet


def _tuple_bytes(values: tuple[object, ...]) -> int:
    return sys.getsizeof(values) + sum(sys.getsizeof(v) for v in values)

Row = tuple[object, ...]
Key = tuple[object, ...]

# A group of a packed state holds its rows as an IntSet from this many rows on.
PACK_MIN = 8
# `estimate_bytes` sizes keys and groups from this many groups, and rows from an eighth as
# many rows of each.
_SAMPLE = 64


# Every eviction of a present key, in any state of the process. A walk that holds answers
# across rounds compares it (`Graph.token`): an eviction between its rounds may have taken a
# key those answers were read under (Noria's invariant 4, prefix presence).
_evictions = [0]


def evictions() -> int:
    """How many present keys were evicted in this process so far."""
    return _evictions[0]


def count_eviction() -> None:
    """Counts an eviction of a state kept outside a KeyedState (an aggregate's groups)."""
    _evictions[0] += 1


class RowLayout:
    """Rows of `width` columns whose key columns `key_cols` (each once) leave one other
    column, `value_pos`: a group of such rows, each of weight 1, is held as an IntSet of
    that column's values, and its rows are rebuilt from the key."""

    __slots__ = ("key_cols", "width", "value_pos")

    def __init__(self, key_cols: tuple[int, ...], width: int) -> None:
        rest = [i for i in range(width) if i not in key_cols]
        assert len(set(key_cols)) == len(key_cols) and len(rest) == 1, "not a packable layout"
        self.key_cols = key_cols
        self.width = width
        self.value_pos = rest[0]

    def same(self, other: RowLayout) -> bool:
        return (self.key_cols, self.width) == (other.key_cols, other.width)

    @staticmethod
    def fits(key_cols: tuple[int, ...], width: int) -> bool:
        return len(set(key_cols)) == len(key_cols) == width - 1

    def row(self, key: Key, value: int) -> Row:
        out: list[object] = [None] * self.width
        for c, k in zip(self.key_cols, key, strict=True):
            out[c] = k
        out[self.value_pos] = value
        return tuple(out)

    def pack(self, rows: Mapping[Row, int]) -> IntSet | None:
        """The rows as an IntSet, or None when some row has another weight than 1 or a
        value that is not a 64-bit int."""
        p = self.value_pos
        values = []
        for row, weight in rows.items():
            value = row[p]
            if weight != 1 or not fits(value):
                return None
            values.append(value)
        return IntSet.of_unique(values)  # type: ignore[arg-type]


class PackedRows:
    """A fetch answer in packed form: for each key, the set of the one other column's values
    (`groups`), rows of `layout`. Iterating gives the rows, for a consumer that wants them;
    a source index with the same layout fills from the sets themselves, building no row."""

    __slots__ = ("layout", "groups")

    def __init__(self, layout: RowLayout, groups: dict[Key, IntSet]) -> None:
        self.layout = layout
        self.groups = groups

    def __iter__(self) -> Iterator[Row]:
        make = self.layout.row
        for key, values in self.groups.items():
            for v in values:
                yield make(key, v)


class PackedGroup(Mapping[Row, int]):
    """A read-only view of a packed group as row -> weight (every weight 1)."""

    __slots__ = ("ints", "key", "layout")

    def __init__(self, values: IntSet, key: Key, layout: RowLayout) -> None:
        self.ints = values
        self.key = key
        self.layout = layout

    def __getitem__(self, row: Row) -> int:
        if self._holds(row):
            return 1
        raise KeyError(row)

    def get(self, row: Row, default: int | None = None) -> int | None:  # type: ignore[override]
        return 1 if self._holds(row) else default

    def _holds(self, row: object) -> bool:
        layout = self.layout
        if type(row) is not tuple or len(row) != layout.width:
            return False
        if any(row[c] != k for c, k in zip(layout.key_cols, self.key, strict=True)):
            return False
        return row[layout.value_pos] in self.ints

    def __contains__(self, row: object) -> bool:
        return self._holds(row)

    def __iter__(self) -> Iterator[Row]:
        make = self.layout.row
        key = self.key
        return (make(key, v) for v in self.ints)

    def __len__(self) -> int:
        return len(self.ints)

    def items(self) -> Iterator[tuple[Row, int]]:  # type: ignore[override]
        make = self.layout.row
        key = self.key
        return ((make(key, v), 1) for v in self.ints)


class KeyedState:
    """Rows with multiplicities, grouped by key; partial or full.

    Compact forms: a key whose group is one row of weight 1 (the common case for a state
    keyed by a unique column, and for every set keyed by its whole row) maps to that row
    itself, not to a dict: a dict per key costs about 200 bytes more. With a `layout` (rows
    whose key leaves one other column), a group of at least PACK_MIN rows of weight 1 whose
    other column holds 64-bit ints is an IntSet of those ints: about 8 bytes a row, against
    about 150 as a dict of tuples. Readers of a group (`get`, `groups`) see a mapping of
    row -> weight in every form.
    """

    __slots__ = (
        "partial", "_groups", "_rows", "layout", "hot", "pinned", "_packed_rows", "_packed_groups",
        "_estimate",
    )

    def __init__(self, *, partial: bool, layout: RowLayout | None = None) -> None:
        self.partial = partial
        self.layout = layout
        # Keys read since the last eviction sweep (`sweep`): their second chance. A read
        # adds to it without the dataflow lock; only a sweep, under the lock, reorders keys.
        self.hot: set[Key] = set()
        # Present keys an open subscription holds, with how many hold each: never evicted
        # (`sweep` passes them by; `evict` refuses them).
        self.pinned: dict[Key, int] = {}
        # key -> its rows and weights, or the key's only row when it has weight 1, or an
        # IntSet (with a layout)
        self._groups: dict[Key, dict[Row, int] | Row | IntSet] = {}
        self._rows = 0
        # Rows and groups held as IntSets (so that `estimate_bytes` need not visit them).
        self._packed_rows = 0
        self._packed_groups = 0
        # The last `estimate_bytes` and the counts it was made at: (keys, rows, packed rows,
        # bytes); -1 keys: none made yet.
        self._estimate = (-1, 0, 0, 0)

    def is_present(self, key: Key) -> bool:
        return not self.partial or key in self._groups

    def get(self, key: Key) -> Mapping[Row, int] | None:
        """The key's rows (row -> weight), or None when the key is missing. Read only."""
        group = self._groups.get(key)
        if group is not None:
            return self._view(key, group)
        if self.partial:
            return None
        return {}

    def _view(self, key: Key, group: dict[Row, int] | Row | IntSet) -> Mapping[Row, int]:
        kind = type(group)
        if kind is dict:
            return group  # type: ignore[return-value]
        if kind is IntSet:
            assert self.layout is not None
            return PackedGroup(group, key, self.layout)  # type: ignore[arg-type]
        return {group: 1}  # type: ignore[dict-item]

    def missing(self, keys: Iterable[Key]) -> list[Key]:
        if not self.partial:
            return []
        return [k for k in dict.fromkeys(keys) if k not in self._groups]

    def _store(self, key: Key, group: dict[Row, int]) -> None:
        if len(group) == 1:
            [(row, weight)] = group.items()
            if weight == 1:
                self._groups[key] = row
                return
        if self.layout is not None and len(group) >= PACK_MIN:
            packed = self.layout.pack(group)
            if packed is not None:
                self._groups[key] = packed
                self._packed_rows += len(packed)
                self._packed_groups += 1
                return
        self._groups[key] = group

    def fill(self, key: Key, rows: Iterable[tuple[Row, int]]) -> None:
        """Marks `key` present with exactly `rows` (an upquery response)."""
        # Invariant: a fill never overwrites a present key, or a write applied
        # to it since would be lost or counted twice (Noria invariant 3).
        assert self.partial and key not in self._groups, f"fill of present key {key!r}"
        if self.layout is not None:
            rows = list(rows)
            if len(rows) >= PACK_MIN:
                packed = self._pack_fill(rows)
                if packed is not None:
                    self._groups[key] = packed
                    self._rows += len(packed)
                    self._packed_rows += len(packed)
                    self._packed_groups += 1
                    return
        group: dict[Row, int] = {}
        for row, weight in rows:
            total = group.get(row, 0) + weight
            if total:
                group[row] = total
            else:
                del group[row]
        self._store(key, group)
        self._rows += len(group)

    def fill_packed(self, key: Key, values: IntSet) -> None:
        """`fill` from a packed answer (the state's layout): the rows are the key with each
        value. The IntSet is kept as it is; the caller hands it over."""
        assert self.partial and key not in self._groups, f"fill of present key {key!r}"
        layout = self.layout
        assert layout is not None
        if len(values) < PACK_MIN:
            self.fill(key, [(layout.row(key, v), 1) for v in values])
            return
        self._groups[key] = values
        self._rows += len(values)
        self._packed_rows += len(values)
        self._packed_groups += 1

    def _pack_fill(self, rows: list[tuple[Row, int]]) -> IntSet | None:
        layout = self.layout
        assert layout is not None
        p = layout.value_pos
        values = []
        for row, weight in rows:
            value = row[p]
            if weight != 1 or not fits(value):
                return None
            values.append(value)
        return IntSet.of_unique(values)  # type: ignore[arg-type]

    def add(self, key: Key, row: Row, weight: int) -> bool:
        """Applies one weighted row; False (and no change) when the key is missing."""
        stored = self._groups.get(key)
        if stored is None:
            if self.partial:
                return False
            group: dict[Row, int] = {}
        elif type(stored) is dict:
            group = stored
        elif type(stored) is IntSet:
            if self._add_packed(stored, row, weight):  # type: ignore[arg-type]
                return True
            group = dict(self._view(key, stored))  # unpacked: a weight or value it cannot hold
            self._packed_rows -= len(group)
            self._packed_groups -= 1
        else:
            group = {stored: 1}  # type: ignore[dict-item]
        old = group.get(row, 0)
        total = old + weight
        if total:
            group[row] = total
            if not old:
                self._rows += 1
        else:
            group.pop(row, None)
            if old:
                self._rows -= 1
        if not group and not self.partial:
            self._groups.pop(key, None)
        else:
            self._store(key, group)
        return True

    def set_presence(self, key: Key, ops: list[tuple[Row, int]]) -> list[tuple[Row, int]] | None:
        """Sets each row's presence in `key`'s group, as a source index applies operations:
        an op > 0 makes its row present (weight 1), an op < 0 absent. The rows are distinct
        (a consolidated delta's) and all have `key`. Returns the rows whose presence changed,
        each with +1 or -1; None, changing nothing, when the key is missing.

        A packed group takes the whole batch at once (one membership test and one merge for
        all its rows: a Zipf delta brings many rows to a hot key); other groups take the
        rows one by one."""
        stored = self._groups.get(key)
        if stored is None and self.partial:
            return None
        if type(stored) is IntSet:
            changed = self._set_presence_packed(stored, ops)
            if changed is not None:
                return changed
        changed = []
        for row, op in ops:
            group = self.get(key)
            assert group is not None
            present = group.get(row, 0) > 0
            if op > 0 and not present:
                self.add(key, row, 1)
                changed.append((row, 1))
            elif op < 0 and present:
                self.add(key, row, -1)
                changed.append((row, -1))
        return changed

    def _set_presence_packed(self, ints: IntSet, ops: list[tuple[Row, int]]) -> list[tuple[Row, int]] | None:
        """`set_presence` on a packed group, or None (nothing changed) when a value is not
        a 64-bit int: the caller then takes the rows one by one (and unpacks the group)."""
        assert self.layout is not None
        p = self.layout.value_pos
        values = [row[p] for row, _ in ops]
        if not all(fits(v) for v in values):
            return None
        inserting = [op > 0 for _, op in ops]
        rows = [row for row, _ in ops]
        return self._packed_changes(ints, rows, values, inserting)  # type: ignore[arg-type]  # fits() said int

    def set_presence_values(
        self, key: Key, rows: list[Row], values: list[int], inserting: list[bool]
    ) -> list[tuple[Row, int]] | None:
        """`set_presence` for a state with a layout, given the rows' values in its packed
        column (64-bit ints, taken once for a whole batch) and whether each row is
        inserted; None, changing nothing, when the key is missing."""
        stored = self._groups.get(key)
        if stored is None and self.partial:
            return None
        if type(stored) is IntSet:
            return self._packed_changes(stored, rows, values, inserting)
        ops = [(row, 1 if ins else -1) for row, ins in zip(rows, inserting, strict=True)]
        return self.set_presence(key, ops)

    def insert_above(self, key: Key, values: list[int], lowest: int, highest: int) -> bool:
        """Inserts the rows of a present key whose values in the packed column are `values`
        (distinct 64-bit ints, from `lowest` to `highest`) when its group is packed and they
        are all above every value it holds: each row is then new, with no membership test
        (a vote's new user, a new time). False, changing nothing, otherwise."""
        ints = self._groups.get(key)
        if type(ints) is not IntSet or lowest <= ints.top:
            return False
        ints.add_above(values, highest)
        self._rows += len(values)
        self._packed_rows += len(values)
        return True

    def _packed_changes(
        self, ints: IntSet, rows: list[Row], values: list[int], inserting: list[bool]
    ) -> list[tuple[Row, int]]:
        changed = packed_presence(ints, rows, values, inserting)
        delta = sum([sign for _, sign in changed])
        self._rows += delta
        self._packed_rows += delta
        return changed

    def _add_packed(self, values: IntSet, row: Row, weight: int) -> bool:
        """Applies a row to a packed group (whose key the row has); False when the result
        is not a set of 64-bit ints, and nothing changed."""
        assert self.layout is not None
        value = row[self.layout.value_pos]
        present = value in values
        total = present + weight
        if total == 1 and not present:
            if not fits(value):
                return False
            values.add(value)  # type: ignore[arg-type]
            self._rows += 1
            self._packed_rows += 1
        elif total == 0 and present:
            values.discard(value)  # type: ignore[arg-type]
            self._rows -= 1
            self._packed_rows -= 1
        elif total != int(present):
            return False
        return True

    def peek(self, key: Key) -> object | None:
        """The key's stored group as it is (a row, a dict or an IntSet), or None when missing.
        A group that changes is replaced, never changed in place, when the state's owner
        applies changes through `replace`: the object then stands for one version of it."""
        return self._groups.get(key)

    def peek_all(self, keys: Iterable[Key]) -> list[object | None]:
        """`peek` of each of `keys`, in one C loop (a hit of 100 keys made 100 Python calls)."""
        return list(map(self._groups.get, keys))

    def view_of(self, key: Key, stored: object) -> Mapping[Row, int]:
        """The mapping row -> weight of a group `peek` returned."""
        return self._view(key, stored)  # type: ignore[arg-type]

    def replace(self, key: Key, changes: Iterable[tuple[Row, int]]) -> bool:
        """Applies weighted rows to a present key by building a new group (copy on write:
        a reader without the lock that holds the old one still sees a whole version);
        False, and no change, when the key is missing."""
        stored = self._groups.get(key)
        if stored is None and self.partial:
            return False
        if type(stored) is tuple and type(changes) is list and len(changes) == 2:
            # A one-row group whose row gives way to another (an aggregate's new value, the
            # commonest change of a reader under writes): the new row is the whole group.
            (gone, out), (row, into) = changes
            if out == -1 and into == 1 and gone == stored:
                self._groups[key] = row
                return True
        old = self._view(key, stored) if stored is not None else {}
        group = dict(old)
        for row, weight in changes:
            total = group.get(row, 0) + weight
            if total:
                group[row] = total
            else:
                group.pop(row, None)
        self._rows += len(group) - len(old)
        if type(stored) is IntSet:
            self._packed_rows -= len(old)
            self._packed_groups -= 1
        if not group and not self.partial:
            self._groups.pop(key, None)
            return True
        self._store(key, group)
        return True

    def touch(self, key: Key) -> None:
        """Marks `key`, if present, as read: the next eviction sweep passes it over once."""
        if self.partial and key in self._groups:
            self.hot.add(key)

    def sweep(self, count: int) -> list[Key]:
        """Up to `count` present keys to evict, least recently used first (second chance:
        the keys are in the order they were filled or last passed over; a key read since
        the last sweep is moved to the back instead of taken, and loses its mark)."""
        assert self.partial, "a full state is never evicted"
        hot, groups, pinned = self.hot, self._groups, self.pinned
        victims: list[Key] = []
        passed: list[Key] = []
        for key in groups:
            if len(victims) >= count:
                break
            if pinned and key in pinned:
                continue
            if key in hot:
                passed.append(key)
            else:
                victims.append(key)
        for key in passed:
            groups[key] = groups.pop(key)
        hot.clear()
        if len(victims) < count:  # every key was read: the oldest go anyway
            victims += passed[: count - len(victims)]
        return victims

    def pass_over(self, keys: Iterable[Key]) -> None:
        """Moves present `keys` behind the others, as a sweep does a key read since the last:
        the next sweeps take other keys first."""
        groups = self._groups
        for key in keys:
            if key in groups:
                groups[key] = groups.pop(key)

    def evict(self, key: Key) -> bool:
        """Makes a present key missing again (partial states only); False if it was missing."""
        assert self.partial, "a full state is never evicted"
        assert key not in self.pinned, f"eviction of {key!r}, which a subscription holds"
        self.hot.discard(key)
        group = self._groups.pop(key, None)
        if group is None:
            return False
        _evictions[0] += 1
        self._rows -= len(group) if type(group) in (dict, IntSet) else 1  # type: ignore[arg-type]
        if type(group) is IntSet:
            self._packed_rows -= len(group)  # type: ignore[arg-type]
            self._packed_groups -= 1
        return True

    def keys(self) -> list[Key]:
        return list(self._groups)

    def estimate_bytes(self) -> int:
        """An estimate of the memory the state holds: the dict of groups, the packed groups
        (counted), and the other groups, keys and rows sized from the first `_SAMPLE` groups
        (values shared between rows are counted once per row: an upper bound).

        It is remade only when the counts of keys, rows or packed rows changed since the last:
        eviction asks every state after each of its steps, and a step changes a few (with
        rows a thousand columns wide, remaking them all made one eviction take minutes). A
        change that keeps every count (a row replaced by another in its group) keeps the
        estimate, as it would keep a sampled one but for the first `_SAMPLE` groups."""
        counts = (len(self._groups), self._rows, self._packed_rows)
        if counts != self._estimate[:3]:
            self._estimate = (*counts, self._sample_bytes(_SAMPLE))
        return self._estimate[3]

    def _sample_bytes(self, sample: int) -> int:
        total = sys.getsizeof(self._groups) + 8 * self._packed_rows + 300 * self._packed_groups
        keys = len(self._groups)
        loose_groups = keys - self._packed_groups
        loose_rows = self._rows - self._packed_rows
        seen_groups = rows_seen = group_bytes = row_bytes = key_bytes = 0
        for key, stored in itertools.islice(self._groups.items(), sample):
            key_bytes += _tuple_bytes(key)
            if type(stored) is IntSet:
                continue
            seen_groups += 1
            rows = stored if type(stored) is dict else (stored,)
            if type(stored) is dict:
                group_bytes += sys.getsizeof(stored)
            for row in itertools.islice(rows, max(1, sample // 8)):  # type: ignore[call-overload]
                row_bytes += _tuple_bytes(row)  # type: ignore[arg-type]
                rows_seen += 1
        if keys:
            total += key_bytes * keys // min(keys, sample)
        if seen_groups:
            total += group_bytes * loose_groups // seen_groups
        if rows_seen:
            total += row_bytes * loose_rows // rows_seen
        return total

    def check(self) -> None:
        """Asserts the counters against the groups (debug runs and tests)."""
        packed = [g for g in self._groups.values() if type(g) is IntSet]
        assert self._packed_groups == len(packed), "packed group count drifted"
        assert self._packed_rows == sum(len(g) for g in packed), "packed row count drifted"  # type: ignore[arg-type]
        rows = sum(len(g) if type(g) in (dict, IntSet) else 1 for g in self._groups.values())  # type: ignore[arg-type]
        assert self._rows == rows, "row count drifted"
        assert self.partial or not self.hot, "a full state has no eviction marks"
        assert all(k in self._groups for k in self.pinned) or not self.partial, "a pinned key went missing"

    def present_keys(self) -> int:
        return len(self._groups)

    def evictable_keys(self) -> int:
        """Present keys that `sweep` may take (the unpinned ones)."""
        return len(self._groups) - len(self.pinned)

    def pin(self, key: Key) -> None:
        """Holds a present key against eviction until as many `unpin`s."""
        assert key in self._groups or not self.partial, f"pin of missing key {key!r}"
        self.pinned[key] = self.pinned.get(key, 0) + 1

    def unpin(self, key: Key) -> None:
        count = self.pinned[key] - 1
        if count:
            self.pinned[key] = count
        else:
            del self.pinned[key]

    def row_count(self) -> int:
        return self._rows

    def groups(self) -> Iterator[tuple[Key, Mapping[Row, int]]]:
        for key, stored in self._groups.items():
            yield key, self._view(key, stored)

    def as_zset(self) -> ZSet[Row]:
        out: ZSet[Row] = ZSet()
        for _, group in self.groups():
            for row, weight in group.items():
                out.add(row, weight)
        return out

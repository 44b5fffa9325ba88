"""Operator state keyed by a tuple of columns, where a key can be *missing*.

DESIGN §3: every state is a map key -> rows, each key missing or present
(present may be empty). A *full* state has every key present, so a lookup of a
key it never saw answers "empty"; a *partial* state answers None ("missing")
until the key is filled by an upquery. Writes that meet a missing key are
dropped by the caller (Noria invariant 2, no partial updates).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator

from .zset import ZSet


def _tuple_bytes(values: tuple[object, ...]) -> int:
    return sys.getsizeof(values) + sum(sys.getsizeof(v) for v in values)

Row = tuple[object, ...]
Key = tuple[object, ...]


class KeyedState:
    """Rows with multiplicities, grouped by key; partial or full.

    Compact form: a key whose group is one row of weight 1 (the common case for a state
    keyed by a unique column, and for every set keyed by its whole row) maps to that row
    itself, not to a dict: a dict per key costs about 200 bytes more. Readers of a group
    (`get`, `groups`) see a dict either way.
    """

    __slots__ = ("partial", "_groups", "_rows")

    def __init__(self, *, partial: bool) -> None:
        self.partial = partial
        # key -> its rows and weights, or the key's only row when it has weight 1
        self._groups: dict[Key, dict[Row, int] | Row] = {}
        self._rows = 0

    def is_present(self, key: Key) -> bool:
        return not self.partial or key in self._groups

    def get(self, key: Key) -> dict[Row, int] | None:
        """The key's rows (row -> weight), or None when the key is missing. Read only."""
        group = self._groups.get(key)
        if group is not None:
            return group if type(group) is dict else {group: 1}  # type: ignore[dict-item]
        if self.partial:
            return None
        return {}

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
        self._groups[key] = group

    def fill(self, key: Key, rows: Iterable[tuple[Row, int]]) -> None:
        """Marks `key` present with exactly `rows` (an upquery response)."""
        # Invariant: a fill never overwrites a present key, or a write applied
        # to it since would be lost or counted twice (Noria invariant 3).
        assert self.partial and key not in self._groups, f"fill of present key {key!r}"
        group: dict[Row, int] = {}
        for row, weight in rows:
            total = group.get(row, 0) + weight
            if total:
                group[row] = total
            else:
                del group[row]
        self._store(key, group)
        self._rows += len(group)

    def add(self, key: Key, row: Row, weight: int) -> bool:
        """Applies one weighted row; False (and no change) when the key is missing."""
        stored = self._groups.get(key)
        if stored is None:
            if self.partial:
                return False
            group: dict[Row, int] = {}
        elif type(stored) is dict:
            group = stored
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

    def evict(self, key: Key) -> bool:
        """Makes a present key missing again (partial states only); False if it was missing."""
        assert self.partial, "a full state is never evicted"
        group = self._groups.pop(key, None)
        if group is None:
            return False
        self._rows -= len(group) if type(group) is dict else 1
        return True

    def keys(self) -> list[Key]:
        return list(self._groups)

    def estimate_bytes(self, sample: int = 64) -> int:
        """An estimate of the memory the state holds: the dicts, plus rows and keys sized
        from a sample (values shared between rows are counted once per row: an upper bound)."""
        total = sys.getsizeof(self._groups)
        rows_seen = 0
        row_bytes = 0
        key_bytes = 0
        for i, (key, stored) in enumerate(self._groups.items()):
            rows = stored if type(stored) is dict else (stored,)
            if type(stored) is dict:
                total += sys.getsizeof(stored)
            if i < sample:
                key_bytes += _tuple_bytes(key)
                for row in list(rows)[: max(1, sample // 8)]:
                    row_bytes += _tuple_bytes(row)  # type: ignore[arg-type]
                    rows_seen += 1
        keys = len(self._groups)
        if keys:
            total += key_bytes * keys // min(keys, sample)
        if rows_seen:
            total += row_bytes * self._rows // rows_seen
        return total

    def present_keys(self) -> int:
        return len(self._groups)

    def row_count(self) -> int:
        return self._rows

    def groups(self) -> Iterator[tuple[Key, dict[Row, int]]]:
        for key, stored in self._groups.items():
            yield key, (stored if type(stored) is dict else {stored: 1})  # type: ignore[misc,dict-item]

    def as_zset(self) -> ZSet[Row]:
        out: ZSet[Row] = ZSet()
        for _, group in self.groups():
            for row, weight in group.items():
                out.add(row, weight)
        return out

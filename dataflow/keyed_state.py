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
    """Rows with multiplicities, grouped by key; partial or full."""

    __slots__ = ("partial", "_groups", "_rows")

    def __init__(self, *, partial: bool) -> None:
        self.partial = partial
        self._groups: dict[Key, dict[Row, int]] = {}
        self._rows = 0

    def is_present(self, key: Key) -> bool:
        return not self.partial or key in self._groups

    def get(self, key: Key) -> dict[Row, int] | None:
        """The key's rows (row -> weight), or None when the key is missing."""
        group = self._groups.get(key)
        if group is not None:
            return group
        if self.partial:
            return None
        return {}

    def missing(self, keys: Iterable[Key]) -> list[Key]:
        if not self.partial:
            return []
        return [k for k in dict.fromkeys(keys) if k not in self._groups]

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
        self._groups[key] = group
        self._rows += len(group)

    def add(self, key: Key, row: Row, weight: int) -> bool:
        """Applies one weighted row; False (and no change) when the key is missing."""
        group = self._groups.get(key)
        if group is None:
            if self.partial:
                return False
            group = self._groups[key] = {}
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
                del self._groups[key]
        return True

    def evict(self, key: Key) -> bool:
        """Makes a present key missing again (partial states only); False if it was missing."""
        assert self.partial, "a full state is never evicted"
        group = self._groups.pop(key, None)
        if group is None:
            return False
        self._rows -= len(group)
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
        for i, (key, group) in enumerate(self._groups.items()):
            total += sys.getsizeof(group)
            if i < sample:
                key_bytes += _tuple_bytes(key)
                for row in list(group)[: max(1, sample // 8)]:
                    row_bytes += _tuple_bytes(row)
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
        return iter(self._groups.items())

    def as_zset(self) -> ZSet[Row]:
        out: ZSet[Row] = ZSet()
        for group in self._groups.values():
            for row, weight in group.items():
                out.add(row, weight)
        return out

"""IntSet: a set of 64-bit integers in about 8 bytes each, for the large groups of a state.

A sorted numpy array holds the bulk; the changes since it was built wait in two small Python
sets (`added`, `removed`) and are merged in once they pass a sixteenth of it, so a write costs
a hash lookup and, amortized, O(log n), not a copy of the array. A group of 219,000 votes
costs 1.7 MB here, against about 50 MB as a dict of row tuples.

Invariants (asserted by `check`):
- `base` is sorted and has no duplicates;
- `added` is disjoint from `base`, `removed` is a subset of it;
- `top` is at least every value held (a bound kept without a search: a write of values above
  it, new ids and times, needs no membership test; see `add_above`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
_BELOW_ALL = INT64_MIN - 1  # `top` of an empty set


def fits(value: object) -> bool:
    """Whether `value` can be held: a Python int (not a bool) in the int64 range."""
    return type(value) is int and INT64_MIN <= value <= INT64_MAX


class IntSet:
    __slots__ = ("base", "added", "removed", "top")

    def __init__(self, values: Iterable[int] = ()) -> None:
        self.base: np.ndarray = np.unique(np.fromiter(values, dtype=np.int64))
        self.added: set[int] = set()
        self.removed: set[int] = set()
        self.top = int(self.base[-1]) if len(self.base) else _BELOW_ALL

    @classmethod
    def of_sorted_unique(cls, values: np.ndarray) -> IntSet:
        """The set of `values`, an int64 array already sorted and without repeats (kept as
        it is, never written to: a merge builds a new array)."""
        out = cls.__new__(cls)
        out.base, out.added, out.removed = values, set(), set()
        out.top = int(values[-1]) if len(values) else _BELOW_ALL
        return out

    @classmethod
    def of_unique(cls, values: list[int]) -> IntSet | None:
        """The set of `values`, or None when they repeat (a multiset is not a set)."""
        out = cls(values)
        return out if len(out.base) == len(values) else None

    def __len__(self) -> int:
        return len(self.base) - len(self.removed) + len(self.added)

    def __contains__(self, value: object) -> bool:
        if value in self.added:
            return True
        if not fits(value) or value in self.removed:
            return False
        base = self.base
        i = int(base.searchsorted(value))  # type: ignore[call-overload]  # the method: np.searchsorted's wrapper cost as much
        return i < len(base) and int(base[i]) == value

    def __iter__(self) -> Iterator[int]:
        if self.removed:
            yield from (v for v in self.base.tolist() if v not in self.removed)
        else:
            yield from self.base.tolist()
        yield from self.added

    def add(self, value: int) -> None:
        """Adds a value that is not in the set."""
        if value in self.removed:
            self.removed.discard(value)
        else:
            self.added.add(value)
            if value > self.top:
                self.top = value
        self._maybe_merge()

    def discard(self, value: int) -> None:
        """Removes a value that is in the set."""
        if value in self.added:
            self.added.discard(value)
        else:
            self.removed.add(value)
        self._maybe_merge()

    def contains_many(self, values: np.ndarray) -> np.ndarray:
        """Membership of each of `values` (int64) as a bool array: one `searchsorted` for
        the batch, not one per value."""
        base = self.base
        if len(base):
            at = np.minimum(np.searchsorted(base, values), len(base) - 1)
            hit = base[at] == values
        else:
            hit = np.zeros(len(values), dtype=bool)
        # The pending sets are small next to the base: a hash lookup each beats np.isin,
        # which sorts them at every call.
        removed, added, n = self.removed, self.added, len(values)
        if removed or added:
            listed = values.tolist()
            if removed:
                hit &= ~np.fromiter((v in removed for v in listed), dtype=bool, count=n)
            if added:
                hit |= np.fromiter((v in added for v in listed), dtype=bool, count=n)
        return hit

    def contains_each(self, values: list[int]) -> list[bool]:
        """Membership of each of `values` (64-bit ints), one binary search each: for a few
        values, where `contains_many`'s numpy calls cost more than they save."""
        base, added, removed = self.base, self.added, self.removed
        size = len(base)
        # Values past the largest held need no search: new ids and times mostly are.
        top = int(base[-1]) if size else 0
        out = []
        for value in values:
            if value in added:
                out.append(True)
            elif value in removed or not size or value > top:
                out.append(False)
            else:
                i = int(base.searchsorted(value))  # type: ignore[call-overload]
                out.append(i < size and int(base[i]) == value)
        return out

    def add_many(self, values: Iterable[int]) -> None:
        """Adds values none of which is in the set (distinct), merging at most once."""
        given = values if isinstance(values, list) else list(values)
        if not given:
            return
        if self.removed:
            new = set(given)
            back = new & self.removed
            self.removed -= back
            self.added |= new - back
        else:  # the common case under inserts: nothing removed since the last merge
            self.added.update(given)
        self.top = max(self.top, max(given))
        self._maybe_merge()

    def add_above(self, values: list[int], largest: int) -> None:
        """Adds distinct `values`, each above `top` (so none is held, and none was removed),
        whose largest is `largest`: no membership test, the write path of new ids."""
        self.added.update(values)
        self.top = largest
        self._maybe_merge()

    def discard_many(self, values: Iterable[int]) -> None:
        """Removes values all of which are in the set (distinct), merging at most once."""
        gone = set(values)
        pending = gone & self.added
        self.added -= pending
        self.removed |= gone - pending
        self._maybe_merge()

    def _maybe_merge(self) -> None:
        if len(self.added) + len(self.removed) > 32 + len(self.base) // 16:
            # Positions by binary search, then one copy each: union1d and isin sorted the
            # whole base again (a hot key's group of 160,000 votes, at every merge).
            base = self.base
            if self.removed:
                gone = np.sort(np.fromiter(self.removed, dtype=np.int64, count=len(self.removed)))
                base = np.delete(base, np.searchsorted(base, gone))  # removed is within base
            if self.added:
                new = np.sort(np.fromiter(self.added, dtype=np.int64, count=len(self.added)))
                if not len(base) or new[0] > base[-1]:
                    base = np.concatenate((base, new))  # all above (new ids): one copy, no search
                else:
                    base = np.insert(base, np.searchsorted(base, new), new)  # added is outside it
            self.base, self.added, self.removed = base, set(), set()
            self.top = int(base[-1]) if len(base) else _BELOW_ALL

    def nbytes(self) -> int:
        """The memory held: the array, and the pending sets (about 60 bytes per value)."""
        return int(self.base.nbytes) + 200 + 60 * (len(self.added) + len(self.removed))

    def check(self) -> None:
        base = self.base
        assert base.dtype == np.int64
        assert bool(np.all(base[1:] > base[:-1])), "base is not sorted and unique"
        members = set(base.tolist())
        assert not (self.added & members), "an added value is in base"
        assert self.removed <= members, "a removed value is not in base"
        assert all(v <= self.top for v in self.added), "an added value is above top"
        assert not len(base) or int(base[-1]) <= self.top, "a value of base is above top"

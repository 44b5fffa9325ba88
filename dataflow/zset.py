"""ZSets and indexed ZSets (PomoFlow §2.1, §2.2).

A ZSet maps each element to a non-zero integer weight: positive weights count
derivations, negative ones retractions. Zero weights are never stored, so two
ZSets are equal exactly when they hold the same elements with the same weights.
Timestamps are not stored here: inside one circuit step every delta belongs to
the step's epoch.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from typing import Generic, TypeVar

E = TypeVar("E", bound=Hashable)
K = TypeVar("K", bound=Hashable)
V = TypeVar("V", bound=Hashable)


class ZSet(Generic[E]):
    """A finite map element -> non-zero weight."""

    __slots__ = ("_w",)

    def __init__(self, items: Mapping[E, int] | Iterable[tuple[E, int]] = ()) -> None:
        self._w: dict[E, int] = {}
        pairs = items.items() if isinstance(items, Mapping) else items
        for element, weight in pairs:
            self.add(element, weight)

    @classmethod
    def of_weights(cls, weights: dict[E, int]) -> ZSet[E]:
        """The Z-set of `weights`, taken as is (not copied): every weight must be non-zero."""
        out: ZSet[E] = cls()
        out._w = weights
        return out

    def add(self, element: E, weight: int = 1) -> None:
        if weight == 0:
            return
        total = self._w.get(element, 0) + weight
        if total:
            self._w[element] = total
        else:
            del self._w[element]

    def extend(self, other: ZSet[E]) -> None:
        mine = self._w
        if not mine:  # a copy: the nested circuit's unions and totals extend empty sets
            self._w = dict(other._w)
            return
        get = mine.get
        for element, weight in other._w.items():
            total = get(element, 0) + weight
            if total:
                mine[element] = total
            else:
                del mine[element]

    def weight(self, element: E) -> int:
        return self._w.get(element, 0)

    def items(self) -> Iterator[tuple[E, int]]:
        return iter(self._w.items())

    def sorted_items(self) -> list[tuple[E, int]]:
        """Items in element order, for deterministic output (elements must be comparable)."""
        return sorted(self._w.items(), key=lambda kv: kv[0])  # type: ignore[arg-type,return-value]

    def elements(self) -> Iterator[E]:
        return iter(self._w)

    def positive(self) -> list[E]:
        return [e for e, w in self._w.items() if w > 0]

    def __len__(self) -> int:
        return len(self._w)

    def __bool__(self) -> bool:
        return bool(self._w)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ZSet) and self._w == other._w

    def __hash__(self) -> int:  # ZSets are mutable; hashing one is a bug.
        raise TypeError("ZSet is unhashable")

    def __repr__(self) -> str:
        return f"ZSet({self._w!r})"

    def __add__(self, other: ZSet[E]) -> ZSet[E]:
        out: ZSet[E] = ZSet(self._w)
        out.extend(other)
        return out

    def __neg__(self) -> ZSet[E]:
        return ZSet({e: -w for e, w in self._w.items()})

    def __sub__(self, other: ZSet[E]) -> ZSet[E]:
        return self + (-other)

    def filter(self, predicate: Callable[[E], bool]) -> ZSet[E]:
        out: ZSet[E] = ZSet()
        out._w = {e: w for e, w in self._w.items() if predicate(e)}
        return out

    def map(self, fn: Callable[[E], K]) -> ZSet[K]:
        # Sums first and drops the zeros once after: a test per element was most of the cost.
        sums: dict[K, int] = {}
        get = sums.get
        for e, w in self._w.items():
            k = fn(e)
            sums[k] = get(k, 0) + w
        out: ZSet[K] = ZSet()
        out._w = sums if all(sums.values()) else {k: w for k, w in sums.items() if w}
        return out

    def distinct(self) -> ZSet[E]:
        out: ZSet[E] = ZSet()
        out._w = {e: 1 for e, w in self._w.items() if w > 0}
        return out

    def index_with(self, key_fn: Callable[[E], K]) -> IndexedZSet[K, E]:
        # Groups of plain dicts, wrapped once: each element is in one group once, with its
        # non-zero weight, so nothing sums or cancels.
        groups: dict[K, dict[E, int]] = {}
        for e, w in self._w.items():
            key = key_fn(e)
            group = groups.get(key)
            if group is None:
                groups[key] = {e: w}
            else:
                group[e] = w
        out: IndexedZSet[K, E] = IndexedZSet()
        out._groups = {key: ZSet.of_weights(group) for key, group in groups.items()}
        return out


class IndexedZSet(Generic[K, V]):
    """A finite map (key, value) -> non-zero weight, accessed by key, then value."""

    __slots__ = ("_groups",)

    def __init__(self) -> None:
        self._groups: dict[K, ZSet[V]] = {}

    def add(self, key: K, value: V, weight: int = 1) -> None:
        group = self._groups.get(key)
        if group is None:
            if weight == 0:
                return
            group = self._groups[key] = ZSet()
        group.add(value, weight)
        if not group:
            del self._groups[key]

    def group(self, key: K) -> ZSet[V] | None:
        return self._groups.get(key)

    def keys(self) -> Iterator[K]:
        return iter(self._groups)

    def groups(self) -> Iterator[tuple[K, ZSet[V]]]:
        return iter(self._groups.items())

    def __len__(self) -> int:
        return sum(len(g) for g in self._groups.values())

    def __bool__(self) -> bool:
        return bool(self._groups)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IndexedZSet) and self._groups == other._groups

    def __hash__(self) -> int:
        raise TypeError("IndexedZSet is unhashable")

    def __repr__(self) -> str:
        return f"IndexedZSet({self._groups!r})"

"""Incremental aggregate states, one per group (PomoFlow §2.9.1, PomoLogic §2.5.3).

An operator that aggregates keeps one `GroupState` per group and feeds it the
group's changes, `add(value, weight)`, instead of recomputing the aggregate from
the group's multiset. `result()` is the aggregate of the multiset seen so far
(NO_VALUE when it has none); `empty()` says whether that multiset is empty.

Contract, per aggregate:

- count: linear. State: the total weight (an int). O(1) per change. The value
  is ignored, so count counts whole tuples.
- sum: linear. State: the exact total of `value * weight` (ints stay ints;
  floats are added as exact fractions, so the result is the correctly rounded
  sum of the multiset, whatever the order of the changes) and the total weight
  of float values, plus the weights of inf/-inf/nan. O(1) per change.
- min, max: not linear. State: the multiset (value -> multiplicity) and a binary
  heap of its values with lazy deletion: a value whose multiplicity drops to 0
  or below stays in the heap until it reaches the top, where it is popped; the
  heap is rebuilt from the live values when stale entries outnumber them. A
  change costs O(log n) amortised comparisons and never rescans the group. Only
  values with a positive multiplicity count; with none the result is NO_VALUE.
  max wraps values in `_Desc` (reversed `<`), so any ordered type works.
- user-defined (`UserAggregate`): not linear, and the only one that is not
  incremental. State: the multiset; the function is recomputed over the group
  when its result is asked for after a change (then cached).

Count and sum keep no multiset, so their `empty()` is "the total weight is 0".
That is exact when multiplicities are non-negative (a set or a bag), which is
the case of every operator's integrated input; the other states are exactly
empty when no value has a non-zero multiplicity.

For a group with no values count and sum answer 0 and min and max NO_VALUE; a
user-defined function is called with `()` and decides.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar, Final, Protocol


class _NoValue:
    """The type of NO_VALUE: the aggregate has no value (min of an empty group)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_VALUE"


NO_VALUE: Final = _NoValue()

# Multiset of positive (value, multiplicity) pairs, sorted by value: a user aggregate's argument.
Items = tuple[tuple[object, int], ...]


class GroupState(Protocol):
    # Whether `add` ignores its value (count): a batch of changes to one group may then be
    # given as its net weight, one `add(None, total)`, without a row (AggregateJoin takes a
    # batch of votes so).
    ignores_values: ClassVar[bool]

    def add(self, value: object, weight: int) -> None:
        """Adds `weight` copies of `value` to the group (removes them when negative)."""

    def result(self) -> object:
        """The aggregate of the group; NO_VALUE when the group has no value."""

    def empty(self) -> bool:
        """Whether the group has no element (see the module docstring for count and sum)."""


def same(a: object, b: object) -> bool:
    """Whether two aggregate results are the same (2 and 2.0 are not; a nan is itself)."""
    if type(a) is not type(b):
        return False
    return a is b or a == b or (a != a and b != b)


class CountState:
    __slots__ = ("_weight",)
    ignores_values: ClassVar[bool] = True

    def __init__(self) -> None:
        self._weight = 0

    def add(self, value: object, weight: int) -> None:
        self._weight += weight

    def result(self) -> object:
        return self._weight

    def empty(self) -> bool:
        return self._weight == 0


_NAN: Final = float("nan")


class SumState:
    """Exact running sum: ints as ints, finite floats as fractions, inf/-inf/nan counted apart."""

    __slots__ = ("_weight", "_exact", "_floats", "_inf", "_neg_inf", "_nan")
    ignores_values: ClassVar[bool] = False

    def __init__(self) -> None:
        self._weight = 0
        self._exact: int | Fraction = 0
        self._floats = 0  # total weight of float values: > 0 makes the result a float
        self._inf = 0
        self._neg_inf = 0
        self._nan = 0

    def add(self, value: object, weight: int) -> None:
        self._weight += weight
        if isinstance(value, float):
            self._floats += weight
            if math.isfinite(value):
                self._exact += Fraction(value) * weight
            elif value > 0:
                self._inf += weight
            elif value < 0:
                self._neg_inf += weight
            else:
                self._nan += weight
            return
        self._exact += value * weight  # type: ignore[operator]

    def result(self) -> object:
        if self._floats <= 0:
            exact = self._exact
            if isinstance(exact, Fraction) and exact.denominator == 1:
                return int(exact)  # the floats that made it a fraction are gone
            return exact
        if self._nan > 0 or (self._inf > 0 and self._neg_inf > 0):
            return _NAN
        if self._inf > 0:
            return math.inf
        if self._neg_inf > 0:
            return -math.inf
        try:
            return float(self._exact)
        except OverflowError:
            return math.inf if self._exact > 0 else -math.inf

    def empty(self) -> bool:
        return self._weight == 0


class _Desc:
    """A value with its order reversed, so that a min-heap of them yields the max."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value

    def __lt__(self, other: _Desc) -> bool:
        return other.value < self.value  # type: ignore[operator,no-any-return]


class _ExtremeState:
    """min (or max, with `_Desc`): a multiset plus a lazily cleaned heap of its values."""

    __slots__ = ("_counts", "_heap", "_in_heap", "_live")
    ignores_values: ClassVar[bool] = False

    def __init__(self) -> None:
        self._counts: dict[object, int] = {}
        self._heap: list[Any] = []  # values (wrapped for max) with, or once with, positive multiplicity
        self._in_heap: set[object] = set()  # the raw values in the heap
        self._live = 0  # values with a positive multiplicity

    def _entry(self, value: object) -> object:
        return value

    def _raw(self, entry: object) -> object:
        return entry

    def add(self, value: object, weight: int) -> None:
        if weight == 0:
            return
        old = self._counts.get(value, 0)
        new = old + weight
        if new:
            self._counts[value] = new
        else:
            del self._counts[value]
        if old <= 0 < new:
            self._live += 1
            if value not in self._in_heap:
                heapq.heappush(self._heap, self._entry(value))
                self._in_heap.add(value)
        elif new <= 0 < old:
            self._live -= 1
            if len(self._heap) > 2 * self._live + 16:
                self._rebuild()
            else:
                self._clean_top()

    def _clean_top(self) -> None:
        heap, counts = self._heap, self._counts
        while heap and counts.get(self._raw(heap[0]), 0) <= 0:
            self._in_heap.discard(self._raw(heapq.heappop(heap)))

    def _rebuild(self) -> None:
        """Drops every stale entry: O(heap), after at least heap/2 removals since the last rebuild."""
        live = [v for v, c in self._counts.items() if c > 0]
        self._heap = [self._entry(v) for v in live]
        heapq.heapify(self._heap)
        self._in_heap = set(live)

    def result(self) -> object:
        # Invariant: the top of the heap, if any, has a positive multiplicity.
        return self._raw(self._heap[0]) if self._heap else NO_VALUE

    def empty(self) -> bool:
        return not self._counts


class MinState(_ExtremeState):
    __slots__ = ()


class MaxState(_ExtremeState):
    __slots__ = ()

    def _entry(self, value: object) -> object:
        return _Desc(value)

    def _raw(self, entry: object) -> object:
        assert isinstance(entry, _Desc)
        return entry.value


@dataclass(frozen=True)
class UserAggregate:
    """A user-defined aggregate: `fn` maps a group's items to its result (or NO_VALUE).

    The items are the group's (value, multiplicity) pairs with a positive
    multiplicity, sorted by value. `fn` MUST be a pure function of that multiset:
    no side effects, and a hashable result that does not depend on the order of
    the pairs. Under `__debug__` each call is checked by calling `fn` again on the
    reversed pairs.
    """

    name: str
    fn: Callable[[Items], object]


def _canonical(items: list[tuple[object, int]]) -> Items:
    try:
        return tuple(sorted(items, key=lambda item: item[0]))  # type: ignore[arg-type,return-value]
    except TypeError:  # values of mixed types: order by type first
        return tuple(sorted(items, key=lambda item: (type(item[0]).__qualname__, repr(item[0]))))


def call_user(aggregate: UserAggregate, items: Items) -> object:
    """`aggregate.fn(items)`, checked for purity as far as is cheap."""
    result = aggregate.fn(items)
    try:
        hash(result)
    except TypeError as error:
        raise TypeError(
            f"aggregate {aggregate.name!r} returned an unhashable {type(result).__name__}"
        ) from error
    if __debug__ and len(items) > 1:
        again = aggregate.fn(items[::-1])
        assert same(result, again), (
            f"aggregate {aggregate.name!r} is not a pure function of its multiset: "
            f"{result!r}, then {again!r} for the same items in reverse order"
        )
    return result


class _Unset:
    __slots__ = ()


_UNSET: Final = _Unset()


class UserState:
    """A user aggregate over the group's multiset, recomputed (once) after a change."""

    __slots__ = ("_aggregate", "_counts", "_cached")
    ignores_values: ClassVar[bool] = False

    def __init__(self, aggregate: UserAggregate) -> None:
        self._aggregate = aggregate
        self._counts: dict[object, int] = {}
        self._cached: object = _UNSET

    def add(self, value: object, weight: int) -> None:
        if weight == 0:
            return
        total = self._counts.get(value, 0) + weight
        if total:
            self._counts[value] = total
        else:
            del self._counts[value]
        self._cached = _UNSET

    def result(self) -> object:
        if self._cached is _UNSET:
            items = _canonical([(v, c) for v, c in self._counts.items() if c > 0])
            self._cached = call_user(self._aggregate, items)
        return self._cached

    def empty(self) -> bool:
        return not self._counts


BUILTINS: Final[dict[str, Callable[[], GroupState]]] = {
    "count": CountState,
    "sum": SumState,
    "min": MinState,
    "max": MaxState,
}
LINEAR: Final = frozenset({"count", "sum"})


def make(function: str | UserAggregate) -> Callable[[], GroupState]:
    """A factory of empty states for `function`: a built-in's name or a UserAggregate."""
    if isinstance(function, UserAggregate):
        return lambda: UserState(function)
    try:
        return BUILTINS[function]
    except KeyError:
        raise ValueError(f"unknown aggregate {function!r}; expected one of {', '.join(BUILTINS)}") from None


def name(function: str | UserAggregate) -> str:
    return function.name if isinstance(function, UserAggregate) else function

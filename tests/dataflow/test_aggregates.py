"""Incremental aggregate states (aggregates.py) vs recomputation from the group's multiset."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pomoview.dataflow.state import aggregates
from pomoview.dataflow.state.aggregates import NO_VALUE, UserAggregate, make, same

SETTINGS = settings(max_examples=200, deadline=None)


def median_low(items: aggregates.Items) -> object:
    values = sorted(v for v, c in items for _ in range(c))  # type: ignore[type-var]
    return values[(len(values) - 1) // 2] if values else NO_VALUE


def concat_sorted(items: aggregates.Items) -> object:
    return "".join(sorted(str(v) * c for v, c in items))


MEDIAN_LOW = UserAggregate("median_low", median_low)
CONCAT = UserAggregate("concat_sorted", concat_sorted)


def recompute(function: str | UserAggregate, multiset: dict[object, int]) -> object:
    """The aggregate of `multiset` (value -> non-zero multiplicity), from scratch."""
    positive = {v: c for v, c in multiset.items() if c > 0}
    if isinstance(function, UserAggregate):
        return function.fn(tuple(sorted(positive.items())))  # type: ignore[arg-type]
    if function == "count":
        return sum(multiset.values())
    if function == "sum":
        exact = sum((Fraction(v) * c for v, c in multiset.items()), Fraction(0))  # type: ignore[arg-type]
        if any(isinstance(v, float) for v in multiset):
            return float(exact)
        return int(exact)
    if not positive:
        return NO_VALUE
    return min(positive) if function == "min" else max(positive)  # type: ignore[type-var]


def check_sequence(
    function: str | UserAggregate, changes: list[tuple[object, int]], *, bag: bool
) -> None:
    """Applies `changes` one by one; after each, the state must agree with recomputation."""
    state = make(function)()
    multiset: dict[object, int] = {}
    assert state.empty()
    for value, weight in changes:
        if bag:  # keep every multiplicity non-negative: a delete removes at most what is there
            weight = max(weight, -multiset.get(value, 0))
        state.add(value, weight)
        total = multiset.get(value, 0) + weight
        if total:
            multiset[value] = total
        else:
            multiset.pop(value, None)
        got, want = state.result(), recompute(function, multiset)
        if bag:
            assert same(got, want), (function, multiset, got, want)
            assert state.empty() == (not multiset), (function, multiset)
        else:  # Z-set weights: count and sum cannot tell a float's presence from its net weight
            assert got == want, (function, multiset, got, want)


ALL = ("count", "sum", "min", "max", MEDIAN_LOW, CONCAT)
INT_CHANGES = st.lists(st.tuples(st.integers(-5, 5), st.integers(-3, 3)), max_size=60)


@pytest.mark.parametrize("function", ALL, ids=lambda f: aggregates.name(f))
@SETTINGS
@given(changes=INT_CHANGES)
def test_bag_of_ints(function: str | UserAggregate, changes: list[tuple[object, int]]) -> None:
    check_sequence(function, changes, bag=True)


@pytest.mark.parametrize("function", ALL, ids=lambda f: aggregates.name(f))
@SETTINGS
@given(changes=INT_CHANGES)
def test_zset_of_ints(function: str | UserAggregate, changes: list[tuple[object, int]]) -> None:
    """Arbitrary (also negative) weights: min, max and user aggregates see only positive values."""
    check_sequence(function, changes, bag=False)


@pytest.mark.parametrize("function", ("min", "max", MEDIAN_LOW, CONCAT), ids=lambda f: aggregates.name(f))
@SETTINGS
@given(changes=st.lists(st.tuples(st.text("abc", max_size=3), st.integers(-2, 2)), max_size=60))
def test_strings(function: str | UserAggregate, changes: list[tuple[object, int]]) -> None:
    check_sequence(function, changes, bag=True)


FLOATS = st.sampled_from((0.1, 0.2, 0.3, 1e16, -1e16, 2.5, -0.7, 1e-300, 3, -2))


@pytest.mark.parametrize("function", ("sum", "min", "max"))
@SETTINGS
@given(changes=st.lists(st.tuples(FLOATS, st.integers(-2, 2)), max_size=60))
def test_floats(function: str, changes: list[tuple[object, int]]) -> None:
    """sum is exact: the correctly rounded sum of the multiset, whatever the order of the changes."""
    check_sequence(function, changes, bag=True)


def test_sum_does_not_drift() -> None:
    state = make("sum")()
    for value, weight in ((0.1, 1), (1e16, 1), (0.2, 1), (1e16, -1), (0.1, -1)):
        state.add(value, weight)
    assert state.result() == 0.2  # a running float total would give 0.0 or 0.2000000000000000something
    state.add(0.2, -1)
    assert state.result() == 0 and type(state.result()) is int  # floats all gone: int again
    state.add(math.inf, 1)
    state.add(5, 1)
    assert state.result() == math.inf
    state.add(-math.inf, 1)
    assert math.isnan(state.result())  # type: ignore[arg-type]
    state.add(math.inf, -1)
    state.add(-math.inf, -1)
    assert state.result() == 5 and type(state.result()) is int


class Counted:
    """An ordered value that counts the comparisons made on it."""

    comparisons = 0
    __slots__ = ("v",)

    def __init__(self, v: int) -> None:
        self.v = v

    def __lt__(self, other: Counted) -> bool:
        Counted.comparisons += 1
        return self.v < other.v

    def __gt__(self, other: Counted) -> bool:
        Counted.comparisons += 1
        return self.v > other.v

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Counted) and self.v == other.v

    def __hash__(self) -> int:
        return hash(self.v)


@pytest.mark.parametrize("function", ("min", "max"))
@pytest.mark.parametrize("seed", range(3))
def test_min_max_do_not_rescan(function: str, seed: int) -> None:
    """n distinct values inserted, then deleted, in random order: O(log n) comparisons per update.

    Rescanning the group (min()/max() over it) on each change would take about n/2
    comparisons per update on average, far over the bound.
    """
    rng = random.Random(seed)
    n = 2000
    values = [Counted(v) for v in range(n)]
    state = make(function)()
    live: set[int] = set()
    Counted.comparisons = 0
    updates = 0
    for phase in (1, -1):
        rng.shuffle(values)
        for value in values:
            state.add(value, phase)
            if phase > 0:
                live.add(value.v)
            else:
                live.discard(value.v)
            updates += 1
            result = state.result()
            if live:
                want = min(live) if function == "min" else max(live)
                assert isinstance(result, Counted) and result.v == want
            else:
                assert result is NO_VALUE
    bound = 4 * math.log2(n) + 10
    assert Counted.comparisons / updates < bound, (Counted.comparisons / updates, bound)
    assert state.empty()


def test_min_max_stale_entries_do_not_pile_up() -> None:
    """Churn far from the top: stale heap entries are dropped, the heap stays O(live values)."""
    state = make("min")()
    state.add(0, 1)
    for v in range(1, 5000):
        state.add(v, 1)
        state.add(v, -1)
    assert state.result() == 0
    assert len(state._heap) < 50  # type: ignore[attr-defined]


def test_max_does_not_negate() -> None:
    state = make("max")()
    for value in ("b", "a", "c"):
        state.add(value, 1)
    assert state.result() == "c"
    state.add("c", -1)
    assert state.result() == "b"


def test_order_dependent_user_aggregate_is_caught() -> None:
    first = UserAggregate("first", lambda items: items[0][0])
    state = make(first)()
    state.add(1, 1)
    assert state.result() == 1  # one item: order cannot show
    state.add(2, 1)
    with pytest.raises(AssertionError, match="'first' is not a pure function"):
        state.result()


def test_unhashable_user_result_is_rejected() -> None:
    as_list = UserAggregate("as_list", lambda items: [v for v, _ in items])
    state = make(as_list)()
    state.add(1, 1)
    with pytest.raises(TypeError, match="'as_list' returned an unhashable list"):
        state.result()


def test_user_aggregate_is_recomputed_only_after_a_change() -> None:
    calls: list[aggregates.Items] = []

    def total(items: aggregates.Items) -> object:
        calls.append(items)
        return sum(v * c for v, c in items)  # type: ignore[operator,misc]

    state = make(UserAggregate("total", total))()
    state.add(3, 2)
    state.add(1, 1)
    assert state.result() == 7
    assert calls[0] == ((1, 1), (3, 2))  # canonical order: sorted by value
    n = len(calls)
    assert state.result() == 7 and len(calls) == n  # cached


def test_empty_groups() -> None:
    assert make("count")().result() == 0
    assert make("sum")().result() == 0
    assert make("min")().result() is NO_VALUE
    assert make("max")().result() is NO_VALUE
    assert make(MEDIAN_LOW)().result() is NO_VALUE
    with pytest.raises(ValueError, match="unknown aggregate 'avg'"):
        make("avg")


def test_no_value_is_reexported() -> None:
    from pomoview.dataflow.operators import aggregate_join

    assert aggregate_join.NO_VALUE is NO_VALUE

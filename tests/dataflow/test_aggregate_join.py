"""AggregateJoin: body rows extended with count/sum/min/max over their group, vs from scratch."""

from __future__ import annotations

from collections import Counter

import pytest
from dataflow_harness import Driver, Store, epochs, touches_missing
from hypothesis import given, settings
from hypothesis import strategies as st

from pomoview.dataflow.node import Node
from pomoview.dataflow.operators.aggregate_join import AggregateJoin
from pomoview.dataflow.operators.map import Column, Map
from pomoview.dataflow.zset import ZSet

# body r(a, b); aggregated atom s(a, v), grouped on a (or on nothing).
SCHEMAS = {"r": ("a", "b"), "s": ("a", "v")}
SETTINGS = settings(max_examples=50, deadline=None)
FUNCTIONS = ("count", "sum", "min", "max")


def aggregate(function: str, values: list[int]) -> object:
    """values: the aggregated value of each (distinct) atom tuple of the group."""
    if function == "count":
        return len(values)
    if function == "sum":
        return sum(values)
    if not values:
        return None
    return min(values) if function == "min" else max(values)


def make_reference(function: str, grouped: bool):
    def reference(store: Store) -> ZSet:
        out: ZSet = ZSet()
        for body in store.data["r"]:
            values = [v for (a, v) in store.data["s"] if not grouped or a == body[0]]
            value = aggregate(function, values)
            if value is not None:
                out.add(body + (value,), 1)
        return out

    return reference


def build(
    store: Store, function: str, grouped: bool, partial: bool, partial_sources: bool, projected: bool
) -> AggregateJoin:
    keys = (0,) if grouped else ()
    body = store.index("r", keys if partial_sources else (), partial_sources)
    atom: Node = store.index("s", keys if partial_sources else (), partial_sources)
    value_col: int | None = None if function == "count" else 1
    if projected and function == "count":
        # As lowering does for `N := count : s(a: A)`: the local column is projected
        # away, so the atom is a multiset whose weights count the tuples.
        atom = Map(atom, ("a",), [Column(0)])
    return AggregateJoin(body, atom, keys, keys, value_col, function, "n", partial=partial)


@pytest.mark.parametrize("function", FUNCTIONS)
@pytest.mark.parametrize("grouped", [True, False], ids=["grouped", "global"])
@SETTINGS
@given(history=epochs(("r", "s")), projected=st.booleans())
def test_full_aggregate(function: str, grouped: bool, history: list, projected: bool) -> None:
    store = Store(SCHEMAS)
    store.apply(history[0][0])
    node = build(store, function, grouped, False, False, projected)
    driver = Driver(store, node, make_reference(function, grouped))
    driver.check()
    for batch, _ in history[1:]:
        driver.step(batch)
        driver.check()
    assert driver.dropped == 0


@pytest.mark.parametrize("function", FUNCTIONS)
@pytest.mark.parametrize("partial_sources", [True, False], ids=["partial-src", "full-src"])
@SETTINGS
@given(history=epochs(("r", "s")), projected=st.booleans(), data=st.data())
def test_partial_aggregate(
    function: str, partial_sources: bool, history: list, projected: bool, data: st.DataObject
) -> None:
    store = Store(SCHEMAS)
    store.apply(history[0][0])
    node = build(store, function, True, True, partial_sources, projected)
    driver = Driver(store, node, make_reference(function, True), key_cols=(0,))
    for batch, _ in history[1:]:
        dropped = driver.dropped
        if partial_sources:
            expect_drop = touches_missing(batch, {"r": (0,), "s": (0,)}, driver.filled)
        else:  # drop iff a net change reaches the aggregate at a missing group
            net: ZSet = ZSet()
            for src, ops in batch.items():
                for row, op in ops.items():
                    if (row in store.data[src]) != (op > 0):
                        collapses = projected and function == "count" and src == "s"
                        net.add((src, row[:1] if collapses else row), op)
            expect_drop = any((row[0],) not in driver.filled for _, row in net.elements())
        driver.step(batch)
        assert (driver.dropped > dropped) == expect_drop
        driver.fill(data.draw(st.lists(st.tuples(st.integers(0, 2)), max_size=2)))
        driver.check()


def test_empty_group_semantics() -> None:
    """count/sum of an empty group are 0; min/max of an empty group emit nothing."""
    for function, expected in (("count", 0), ("sum", 0), ("min", None), ("max", None)):
        store = Store(SCHEMAS)
        store.data["r"].add((1, 7))
        node = build(store, function, True, False, False, False)
        driver = Driver(store, node, make_reference(function, True))
        assert driver.total == (ZSet({(1, 7, expected): 1}) if expected is not None else ZSet())
        driver.step({"s": {(1, 4): 1, (1, 2): 1, (2, 9): 1}})
        want = {"count": 2, "sum": 6, "min": 2, "max": 4}[function]
        assert driver.total == ZSet({(1, 7, want): 1})
        driver.step({"s": {(1, 4): -1, (1, 2): -1}})
        driver.check()


def test_sum_counts_each_tuple_once_even_with_equal_values() -> None:
    store = Store({"r": ("a", "b"), "s": ("a", "x", "v")})
    store.data["r"].add((1, 0))
    store.data["s"] |= {(1, 1, 5), (1, 2, 5)}
    atom = Map(store.index("s", (), False), ("a", "v"), [Column(0), Column(2)])
    node = AggregateJoin(store.index("r", (), False), atom, (0,), (0,), 1, "sum", "n", partial=False)
    driver = Driver(store, node, lambda s: ZSet({(1, 0, sum(v for _, _, v in s.data["s"])): 1}))
    assert driver.total == ZSet({(1, 0, 10): 1})
    driver.step({"s": {(1, 1, 5): -1}})
    assert driver.total == ZSet({(1, 0, 5): 1})
    assert Counter(dict(driver.total.items())) == Counter({(1, 0, 5): 1})


def test_a_count_takes_a_batch_as_net_weights_and_drops_each_row_of_a_missing_group() -> None:
    """The atom's delta straight into a partial count (its batch path: one net weight per
    group): inserts and deletes of a present group net out, and every row of a missing
    group counts as dropped, one each."""
    store = Store(SCHEMAS)
    store.data["r"] |= {(1, 7), (2, 8)}
    store.data["s"] |= {(1, 4), (1, 5)}
    node = build(store, "count", True, True, False, False)
    driver = Driver(store, node, make_reference("count", True), key_cols=(0,))
    assert driver.fill([(1,)]) == ZSet({(1, 7, 2): 1})
    dropped = node.metrics.dropped
    out = node.on_delta(1, ZSet({(1, 6): 1, (1, 9): 1, (1, 4): -1, (2, 1): 1, (2, 2): 1, (2, 3): -1}))
    assert out == ZSet({(1, 7, 2): -1, (1, 7, 3): 1})
    assert node.metrics.dropped - dropped == 3
    assert node.on_delta(1, ZSet({(1, 10): 1, (1, 6): -1})) == ZSet()  # a net 0: no change

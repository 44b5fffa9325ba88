"""Aggregate (PomoFlow §2.9.1): the node, epoch by epoch, vs the `aggregate` reference function."""

from __future__ import annotations

from collections.abc import Collection

import pytest
from dataflow_harness import Driver, Store, epochs
from hypothesis import given, settings
from hypothesis import strategies as st

from pomoview.dataflow.node import Node
from pomoview.dataflow.operators.aggregate import Aggregate, aggregate
from pomoview.dataflow.operators.index_with import IndexWith
from pomoview.dataflow.state.aggregates import NO_VALUE, Items, UserAggregate, name
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.zset import ZSet

SETTINGS = settings(max_examples=60, deadline=None)


class Rows(Node):
    """A stand-in input: holds a ZSet and answers the whole of it to an upquery."""

    def __init__(self, rows: ZSet[Row] | None = None) -> None:
        super().__init__(("k", "v"))
        self.rows: ZSet[Row] = rows if rows is not None else ZSet()

    def upquery(self, cols: tuple[int, ...], keys: Collection[Key]) -> ZSet[Row]:
        assert cols == () and list(keys) == [()]
        return ZSet(dict(self.rows.items()))


def median_low(items: Items) -> object:
    values = sorted(v for v, c in items for _ in range(c))  # type: ignore[type-var]
    return values[(len(values) - 1) // 2] if values else NO_VALUE


def odd_only_sum(items: Items) -> object:
    """NO_VALUE unless the group holds an odd value: exercises groups without a row."""
    odd = [v * c for v, c in items if v % 2]  # type: ignore[operator]
    return sum(odd) if odd else NO_VALUE  # type: ignore[arg-type]


def key(row: Row) -> object:
    return row[0]


def second(row: Row) -> object:
    return row[1]


def build(function: str | UserAggregate, initial: ZSet[Row] | None = None, **kw: object) -> Aggregate:
    source = Rows(initial)
    node = Aggregate(IndexWith(source, key), function, **kw)  # type: ignore[arg-type]
    node.hydrate()
    return node


def step(node: Aggregate, delta: ZSet[Row], epoch: int) -> ZSet[Row]:
    """One epoch: the delta through IndexWith, then the Aggregate node."""
    index = node.inputs[0]
    indexed = index.eval([delta], (epoch,))
    out = node.eval([indexed], (epoch,))
    assert isinstance(out, ZSet)
    return out


def test_spec_example() -> None:
    """§2.9.1: aggregate(count, {(1,"foo"), (1,"bar"), (2,"baz")}) => {(1,2), (2,1)}."""
    rows: ZSet[Row] = ZSet({(1, "foo"): 1, (1, "bar"): 1, (2, "baz"): 1})
    want = ZSet({(1, 2): 1, (2, 1): 1})
    assert aggregate("count", rows.index_with(key)) == want
    node = build("count")
    assert step(node, rows, 1) == want
    assert node.query((), [()]) == want
    hydrated = build("count", rows)
    assert hydrated.query((), [()]) == want
    assert hydrated.query((0,), [(2,)]) == ZSet({(2, 1): 1})


def test_changed_groups_only_and_empty_groups_have_no_row() -> None:
    node = build("min", ZSet({(1, 5): 1, (2, 7): 1}), value_fn=second)
    assert step(node, ZSet({(1, 9): 1}), 1) == ZSet()  # min unchanged: nothing emitted
    assert step(node, ZSet({(1, 3): 1, (2, 7): -1}), 2) == ZSet({(1, 5): -1, (1, 3): 1, (2, 7): -1})
    assert node.query((), [()]) == ZSet({(1, 3): 1})
    counts = build("count", ZSet({(1, 5): 1}))
    assert step(counts, ZSet({(1, 5): -1}), 1) == ZSet({(1, 1): -1})  # no (1, 0): the group is gone
    assert counts.query((), [()]) == ZSet()


def test_output_and_value_functions() -> None:
    node = build("sum", value_fn=second, output=lambda k, a: (a, k, "total"))
    assert step(node, ZSet({(1, 2): 1, (1, 3): 1}), 1) == ZSet({(5, 1, "total"): 1})
    assert node.query((2,), [("total",)]) == ZSet({(5, 1, "total"): 1})
    assert node.describe() == "Aggregate(sum)" and node.schema == ("key", "sum")


FUNCTIONS = (
    "count",
    "sum",
    "min",
    "max",
    UserAggregate("median_low", median_low),
    UserAggregate("odd_only_sum", odd_only_sum),
)
ROWS = st.tuples(st.integers(0, 2), st.integers(-3, 3))
# Epochs of operations: row -> +n inserts n copies, -n deletes up to n copies.
EPOCHS = st.lists(st.dictionaries(ROWS, st.integers(-2, 2).filter(bool), max_size=6), min_size=1, max_size=10)


# (function, aggregate column 1 or the whole row); sum and the user functions need numbers.
CASES = [(f, True) for f in FUNCTIONS] + [(f, False) for f in ("count", "min", "max")]
IDS = [f"{name(f)}-{'value' if by_value else 'row'}" for f, by_value in CASES]


@pytest.mark.parametrize(("function", "by_value"), CASES, ids=IDS)
@pytest.mark.parametrize("mode", ["set", "bag"])
@SETTINGS
@given(epochs=EPOCHS)
def test_node_matches_reference(
    function: str | UserAggregate, by_value: bool, mode: str, epochs: list[dict[Row, int]]
) -> None:
    """Random epochs of inserts and deletes, on a set or a bag, starting from a hydrated state."""
    value_fn = second if by_value else None
    data: ZSet[Row] = ZSet()

    def apply(ops: dict[Row, int]) -> ZSet[Row]:
        delta: ZSet[Row] = ZSet()
        for row, op in ops.items():
            have = data.weight(row)
            if mode == "set":
                weight = (1 - have) if op > 0 else -have
            else:
                weight = max(op, -have)
            delta.add(row, weight)
        data.extend(delta)
        return delta

    apply(epochs[0])
    node = build(function, ZSet(dict(data.items())), value_fn=value_fn)
    total = node.query((), [()])
    for epoch, ops in enumerate(epochs[1:], start=1):
        total.extend(step(node, apply(ops), epoch))
        want = aggregate(function, data.index_with(key), value_fn)
        assert total == want, (epoch, total, want)
        assert node.query((), [()]) == want
        for k in range(3):
            assert node.query((0,), [(k,)]) == want.filter(lambda r, k=k: r[0] == k)
        assert all(w == 1 for _, w in total.items())


@pytest.mark.parametrize("function", FUNCTIONS, ids=name)
@SETTINGS
@given(history=epochs(("s",), domain=4))
def test_circuit_matches_reference(function: str | UserAggregate, history: list) -> None:
    """In a Circuit: SourceIndex (full, hydrated) -> IndexWith -> Aggregate, epoch after epoch.

    The Driver sums the output deltas from the hydrated output and compares them,
    and the node's `query`, with `aggregate` over the source after every epoch.
    """
    store = Store({"s": ("k", "v")})
    store.apply(history[0][0])
    node = Aggregate(IndexWith(store.index("s", (), False), key), function, second)

    def reference(store: Store) -> ZSet[Row]:
        return aggregate(function, ZSet({row: 1 for row in store.data["s"]}).index_with(key), second)

    driver = Driver(store, node, reference)
    driver.check()
    for batch, _ in history[1:]:
        driver.step(batch)
        driver.check()
    assert driver.dropped == 0

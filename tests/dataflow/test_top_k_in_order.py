"""A TopK's refills read the next rows in order from the state above (InOrder,
dataflow/operators/in_order.py, dataflow/state/ordered_index.py), against a sorted Python
model: the windows equal the model's after every write, the index equals its state's rows,
and a refill reads at most the places it fills plus one row."""

from __future__ import annotations

import pytest
from dataflow_harness import Store
from hypothesis import given, settings
from hypothesis import strategies as st

from pomoview.dataflow.circuit import Circuit
from pomoview.dataflow.operators.distinct_incremental import DistinctIncremental
from pomoview.dataflow.operators.in_order import InOrder
from pomoview.dataflow.operators.source_index import SourceIndex
from pomoview.dataflow.operators.top_k import TopK
from pomoview.dataflow.operators.union import Union
from pomoview.dataflow.state.keyed_state import Row
from pomoview.dataflow.zset import ZSet

SCHEMA = {"r": ("k", "score", "id")}
# (column, descending): score desc then id; score asc alone (ties: the whole row); id desc.
ORDERS = [((1, True), (2, False)), ((1, False),), ((2, True),)]
KEYS = 2
SETTINGS = settings(max_examples=60, deadline=None)

# Few scores (ties on the order attributes), enough ids that a key holds many more rows
# than a window: a pull of the whole key would read far more than a refill may.
row_st = st.tuples(st.integers(0, KEYS - 1), st.integers(0, 3), st.integers(0, 19))
action_st = st.one_of(
    st.tuples(st.just("write"), st.dictionaries(row_st, st.sampled_from((1, -1)), max_size=8)),
    st.tuples(st.just("top"), st.integers(0, KEYS - 1)),  # delete the key's first row
    st.tuples(st.just("lookup"), st.lists(st.integers(0, KEYS - 1), min_size=1, max_size=2)),
    st.tuples(st.just("evict above"), st.integers(0, KEYS - 1)),
    st.tuples(st.just("evict"), st.integers(0, KEYS - 1)),
)


def model(store: Store, key: int, order: tuple, limit: int) -> list[Row]:
    """The key's first `limit` rows in `order` (ties: the whole row ascending), sorted with a
    comparison of its own: a stable sort per column, the last first."""
    rows = sorted(r for r in store.data["r"] if r[0] == key)
    for column, descending in reversed(order):
        rows.sort(key=lambda r, c=column: r[c], reverse=descending)
    return rows[:limit]


def build(store: Store, order: tuple, limit: int, above: str) -> tuple[Circuit, TopK, InOrder]:
    source = store.index("r", (0,), True)
    state: InOrder = source if above == "source" else DistinctIncremental(source, (0,), partial=True)
    top = TopK(state, (0,), partial=True, order=order, limit=limit)
    circuit = Circuit(top)
    circuit.hydrate()
    return circuit, top, state


def write(store: Store, ops: dict[Row, int]) -> dict[str, ZSet[Row]]:
    real = {r: w for r, w in ops.items() if (w > 0) != (r in store.data["r"])}
    return store.apply({"r": real})


def check(store: Store, top: TopK, state: InOrder, order: tuple, limit: int) -> None:
    """Every present window is the model's, and the index is its state's rows in order."""
    for key in top.state.keys():
        window = sorted(top.state.get(key) or {}, key=top.sort_key)
        assert window == model(store, key[0], order, limit), key
    index = state.order_index(order)
    if index is not None:
        index.check(state.state.get)


@pytest.mark.parametrize("above", ["source", "distinct"])
@pytest.mark.parametrize("limit", [1, 3])
@pytest.mark.parametrize("order", ORDERS)
@SETTINGS
@given(initial=st.sets(row_st, max_size=30), actions=st.lists(action_st, max_size=16))
def test_refills_read_in_order_match_the_sorted_model(
    order: tuple, limit: int, above: str, initial: set, actions: list
) -> None:
    store = Store(SCHEMA)
    store.apply({"r": dict.fromkeys(initial, 1)})
    circuit, top, state = build(store, order, limit, above)
    for kind, arg in actions:
        if kind in ("write", "top"):
            if kind == "top":
                first = model(store, arg, order, 1)
                arg = {first[0]: -1} if first else {}
            refills, pulled = top.refills, top.pulled_rows
            circuit.step(write(store, arg))
            # Each refill reads at most the places a write emptied (up to the limit) plus
            # one row (whether the key stays cut), never the key.
            assert top.pulled_rows - pulled <= (top.refills - refills) * (limit + 1)
        elif kind == "lookup":
            keys = [(k,) for k in arg]
            for (k,), rows in zip(keys, circuit.lookup(keys), strict=True):
                assert rows == model(store, k, order, limit), (k, rows)
        elif kind == "evict above":
            state.evict_own([(arg,)])  # goes below too: the TopK loses the key
            assert top.state.get((arg,)) is None
        else:
            top.evict_own([(arg,)])  # the state above keeps the key and its index
        check(store, top, state, order, limit)
    for k in range(KEYS):
        assert circuit.lookup([(k,)])[0] == model(store, k, order, limit)
    check(store, top, state, order, limit)


def test_deleting_the_top_row_of_a_large_key_reads_two_rows_per_refill() -> None:
    """2,000 rows of one key, limit 10: each delete of the first row refills one place from
    the index (one row, and one more that says the key stays cut); the index was built at
    the fill and grows by doubling, so its builds read the key a few times in all."""
    store = Store(SCHEMA)
    store.apply({"r": {(0, i % 50, i): 1 for i in range(2000)}})
    order = ((1, True), (2, False))
    circuit, top, state = build(store, order, 10, "distinct")
    assert circuit.lookup([(0,)])[0] == model(store, 0, order, 10)
    assert top.pulled_rows == 2000  # the fill: every row, once
    fetches = len(store.fetches)
    for n in range(1, 41):
        pulled = top.pulled_rows
        circuit.step(write(store, {model(store, 0, order, 1)[0]: -1}))
        assert top.refills == n and top.pulled_rows - pulled == 2
        assert circuit.lookup([(0,)])[0] == model(store, 0, order, 10)
    assert len(store.fetches) == fetches
    index = state.order_index(order)
    assert index is not None
    index.check(state.state.get)
    assert index.builds <= 3 and index.built_rows <= 3 * 2000, (index.builds, index.built_rows)


def test_inserts_before_the_bound_keep_the_index_bounded() -> None:
    """Rows inserted ahead of the window enter the index's prefix; past twice its size it
    drops its last rows and its bound comes down, still exact."""
    store = Store(SCHEMA)
    store.apply({"r": {(0, 0, i): 1 for i in range(100)}})
    order = ((2, True),)  # id desc: each new id comes first
    circuit, top, state = build(store, order, 2, "source")
    circuit.lookup([(0,)])
    for i in range(100, 140):
        circuit.step(write(store, {(0, 0, i): 1}))
    index = state.order_index(order)
    assert index is not None
    index.check(state.state.get)
    # A prefix of at most twice its size (√100 = 10 rows: more than the fill's 2 x 2), not
    # the key's 140 rows.
    assert 0 < index.held((0,)) <= 20
    for _ in range(30):
        circuit.step(write(store, {model(store, 0, order, 1)[0]: -1}))
        assert circuit.lookup([(0,)])[0] == model(store, 0, order, 2)
    index.check(state.state.get)


def test_without_an_ordered_state_above_a_refill_pulls_the_key() -> None:
    """A Union above keeps no order: the refill pulls every row of the key, as before."""
    store = Store({"r": SCHEMA["r"], "s": SCHEMA["r"]})
    store.apply({"r": {(0, s, s): 1 for s in range(50)}, "s": {(0, 100, 100): 1}})
    r, s = store.index("r", (0,), True), store.index("s", (0,), True)
    top = TopK(Union((r, s)), (0,), partial=True, order=((1, True),), limit=2)
    circuit = Circuit(top)
    circuit.hydrate()
    assert circuit.lookup([(0,)]) == [[(0, 100, 100), (0, 49, 49)]]
    pulled = top.pulled_rows
    circuit.step(store.apply({"r": {(0, 49, 49): -1}}))
    assert top.refills == 1 and top.pulled_rows - pulled == 50  # 49 of r, 1 of s
    assert circuit.lookup([(0,)]) == [[(0, 100, 100), (0, 48, 48)]]


def test_the_index_counts_in_the_state_bytes_and_leaves_with_its_key() -> None:
    store = Store(SCHEMA)
    store.apply({"r": {(0, i, i): 1 for i in range(300)}})
    source = SourceIndex("r", SCHEMA["r"], (0,), store.fetch, partial=True)
    top = TopK(source, (0,), partial=True, order=((1, True),), limit=5)
    circuit = Circuit(top)
    circuit.hydrate()
    assert source.state_summary().bytes == source.state.estimate_bytes()
    circuit.lookup([(0,)])
    index = source.order_index(((1, True),))
    assert index is not None and (0,) in index
    extra = source.state_summary().bytes - source.state.estimate_bytes()
    assert extra == index.estimate_bytes() > 0
    source.evict_own([(0,)])
    assert (0,) not in index and top.state.get((0,)) is None

"""SourceIndex: exact set deltas from insert/delete operations; partial fill on miss."""

from __future__ import annotations

import random

import pytest
from dataflow_harness import Driver, Store, epochs, touches_missing
from hypothesis import given, settings
from hypothesis import strategies as st

from pomoview.dataflow.operators import source_index
from pomoview.dataflow.operators.filter import Filter
from pomoview.dataflow.zset import ZSet

SCHEMAS = {"r": ("a", "b")}
SETTINGS = settings(max_examples=80, deadline=None)


def reference(store: Store) -> ZSet:
    return ZSet({row: 1 for row in store.data["r"]})


def test_insert_of_present_and_delete_of_absent_are_nothing() -> None:
    store = Store(SCHEMAS)
    index = store.index("r", (0,), fetch_partial=False)
    index.hydrate()
    assert index.on_delta(0, ZSet({(1, 1): 1})) == ZSet({(1, 1): 1})
    assert index.on_delta(0, ZSet({(1, 1): 1})) == ZSet()  # present: no-op
    assert index.on_delta(0, ZSet({(2, 2): -1})) == ZSet()  # absent: no-op
    assert index.on_delta(0, ZSet({(1, 1): -1, (1, 2): 1})) == ZSet({(1, 1): -1, (1, 2): 1})
    assert index.on_delta(0, ZSet({(1, 1): -1})) == ZSet()
    assert index.query((0,), [(1,)]) == ZSet({(1, 2): 1})
    assert index.query((1,), [(2,), (9,)]) == ZSet({(1, 2): 1})
    assert index.metrics.dropped == 0


def test_partial_drops_missing_and_fetches_once() -> None:
    store = Store(SCHEMAS)
    store.data["r"] |= {(1, 1), (1, 2), (2, 1)}
    index = store.index("r", (0,), fetch_partial=True)
    index.hydrate()  # a partial index loads nothing
    assert store.fetches == []
    assert index.on_delta(0, ZSet({(1, 3): 1})) == ZSet()  # key (1,) missing: dropped
    assert index.metrics.dropped == 1
    store.data["r"].add((1, 3))
    assert index.query((0,), [(1,), (1,), (3,)]) == ZSet({(1, 1): 1, (1, 2): 1, (1, 3): 1})
    assert store.fetches == [("r", ("a",), [(1,), (3,)])]
    # present keys are answered from state, missing ones only are fetched
    assert index.query((0,), [(1,)]) == ZSet({(1, 1): 1, (1, 2): 1, (1, 3): 1})
    assert len(store.fetches) == 1
    # present-but-empty key (3,): deltas apply, no drop
    assert index.on_delta(0, ZSet({(3, 0): 1, (1, 1): 1, (1, 2): -1})) == ZSet({(3, 0): 1, (1, 2): -1})
    assert index.metrics.dropped == 1
    assert index.on_delta(0, ZSet({(2, 5): -1, (0, 0): 1})) == ZSet()
    assert index.metrics.dropped == 3


@SETTINGS
@given(epochs(("r",)), st.booleans())
def test_random_batches_full(history: list, by_second: bool) -> None:
    store = Store(SCHEMAS)
    store.apply(history[0][0])
    driver = Driver(store, store.index("r", (1,) if by_second else (0,), False), reference)
    driver.check()
    for batch, _ in history[1:]:
        driver.step(batch)
        driver.check()
        # the output delta is exactly the set difference
        assert all(w in (1, -1) for d in driver.sink.deltas for _, w in d.items())
    assert driver.dropped == 0


@SETTINGS
@given(epochs(("r",)))
def test_random_batches_partial(history: list) -> None:
    store = Store(SCHEMAS)
    store.apply(history[0][0])
    index = store.index("r", (0,), True)
    driver = Driver(store, index, reference, key_cols=(0,))
    for batch, lookups in history[1:]:
        dropped = driver.dropped
        missing = touches_missing(batch, {"r": (0,)}, driver.filled)
        driver.step(batch)
        assert (driver.dropped > dropped) == missing
        driver.fill(lookups)
        driver.check()


# -- constant filters ---------------------------------------------------------------


def filtered_reference(store: Store) -> ZSet:
    return ZSet({row: 1 for row in store.data["r"] if row[1] == 1})


def test_filters_go_to_the_fetch_and_select_the_deltas() -> None:
    store = Store(SCHEMAS)
    store.data["r"] |= {(1, 1), (1, 2), (2, 1)}
    index = store.index("r", (0,), fetch_partial=True, filters=(("b", 1),))
    assert index.query((0,), [(1,), (3,)]) == ZSet({(1, 1): 1})
    assert store.fetches == [("r", ("a",), [(1,), (3,)])]
    assert store.filters == [(("b", 1),)]
    # a row failing the filter is not part of the output, present key or not
    assert index.on_delta(0, ZSet({(1, 3): 1, (3, 2): 1, (5, 2): 1})) == ZSet()
    assert index.metrics.dropped == 0
    assert index.on_delta(0, ZSet({(3, 1): 1, (1, 1): -1, (5, 1): 1})) == ZSet({(3, 1): 1, (1, 1): -1})
    assert index.metrics.dropped == 1
    full = store.index("r", (0,), fetch_partial=False, filters=(("b", 1),))
    full.hydrate()
    assert store.fetches[-1] == ("r", (), [()])
    assert store.filters[-1] == (("b", 1),)
    assert full.query((), [()]) == ZSet({(1, 1): 1, (2, 1): 1})  # the store, not the deltas
    assert "b == 1" in full.describe()


@SETTINGS
@given(epochs(("r",)), st.booleans())
def test_random_batches_filtered_matches_unfiltered_then_filter(
    history: list, partial: bool
) -> None:
    """A SourceIndex with the filter b == 1 gives the output of the unfiltered index with
    a Filter b == 1 above it, and both the filtered source."""
    key_cols = (0,) if partial else None
    stores = [Store(SCHEMAS), Store(SCHEMAS)]
    for store in stores:
        store.apply(history[0][0])
    filtered = stores[0].index("r", (0,), partial, filters=(("b", 1),))
    reference_top = Filter(stores[1].index("r", (0,), partial), lambda row: row[1] == 1)
    drivers = [
        Driver(stores[0], filtered, filtered_reference, key_cols=key_cols),
        Driver(stores[1], reference_top, filtered_reference, key_cols=key_cols),
    ]
    for batch, lookups in history[1:]:
        for driver in drivers:
            driver.step(batch)
        got, want = (ZSet[tuple]() for _ in drivers)
        for delta in drivers[0].sink.deltas:
            got.extend(delta)
        for delta in drivers[1].sink.deltas:
            want.extend(delta)
        assert got == want
        if partial:
            answers = [driver.fill(lookups) for driver in drivers]
            assert answers[0] == answers[1]
        for driver in drivers:
            driver.check()
    assert all(f == (("b", 1),) for f in stores[0].filters)
    assert all(f == () for f in stores[1].filters)


# -- large deltas by one int column: grouped by sorting (SORT_MIN) ---------------------------


def assert_like_a_set_model(
    index: source_index.SourceIndex,
    ops: dict[tuple[int, int], int],
    present: set[int],
    model: set[tuple[int, int]],
) -> None:
    """Applies `ops` (+1 insert, -1 delete of a row keyed by its first column) to the index
    and to `model`, the rows of the `present` keys: the index's output, drops, state and
    invariants must be the set model's."""
    expected = {
        row: op for row, op in ops.items() if row[0] in present and (op > 0) != (row in model)
    }
    dropped = index.metrics.dropped
    assert index.on_delta(0, ZSet(ops)) == ZSet(expected)
    assert index.metrics.dropped - dropped == sum(1 for row in ops if row[0] not in present)
    model |= {r for r, w in expected.items() if w > 0}
    model -= {r for r, w in expected.items() if w < 0}
    assert index.query((0,), [(k,) for k in present]) == ZSet(dict.fromkeys(model, 1))
    index.state.check()


@pytest.mark.parametrize("sort_min", [0, 10**9], ids=["sorted", "dict"])
def test_large_random_deltas_against_a_set_model(sort_min: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Deltas of 300-700 operations on a partial index by an int column, through the
    sorting path and the dict path: the same output, drops and state as a plain set model
    (groups of up to 40 rows, so most are packed)."""
    monkeypatch.setattr(source_index, "SORT_MIN", sort_min)
    rng = random.Random(5)
    store = Store(SCHEMAS)
    store.data["r"] = {(rng.randrange(50), rng.randrange(40)) for _ in range(800)}
    index = store.index("r", (0,), True)
    present = set(rng.sample(range(50), 20))
    index.query((0,), [(k,) for k in present])
    model = {row for row in store.data["r"] if row[0] in present}
    for _ in range(30):
        size = rng.randrange(300, 700)
        ops = {(rng.randrange(50), rng.randrange(40)): rng.choice((1, -1)) for _ in range(size)}
        assert_like_a_set_model(index, ops, present, model)


def test_a_bool_in_a_packed_column_stays_a_bool() -> None:
    """A large delta on a packed group (ints) with a row whose value is True: the batch path
    must not take True for 1 (a row already present) nor give it back as 1."""
    store = Store(SCHEMAS)
    store.data["r"] = {(1, v) for v in range(2, 40)}
    index = store.index("r", (0,), True)
    index.query((0,), [(1,)])
    ops = {(1, v): 1 for v in range(100, 400)} | {(1, True): 1}
    out = index.on_delta(0, ZSet(ops))
    assert ((1, True), 1) in [(row, w) for row, w in out.items() if row[1] is True]
    held = [row for row, _ in index.query((0,), [(1,)]).items() if row[1] == 1]
    assert held and all(row[1] is True for row in held)


@pytest.mark.parametrize("sort_min", [0, 10**9], ids=["sorted", "dict"])
def test_inserts_at_and_above_the_top_against_a_set_model(
    sort_min: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs of inserts near the largest value a packed group holds (a vote's new user):
    values above it, equal to it, just below it, and values deleted then inserted again,
    where a key's run is all inserts or not. The output, drops and state equal a plain set
    model's, and every group's bound on its values (`IntSet.top`) holds."""
    monkeypatch.setattr(source_index, "SORT_MIN", sort_min)
    rng = random.Random(11)
    store = Store(SCHEMAS)
    store.data["r"] = {(k, v) for k in range(30) for v in range(rng.randrange(20, 60))}
    index = store.index("r", (0,), True)
    present = set(rng.sample(range(30), 20))
    index.query((0,), [(k,) for k in present])
    model = {row for row in store.data["r"] if row[0] in present}
    for _ in range(40):
        ops: dict[tuple[int, int], int] = {}
        for key in rng.sample(range(30), 25):
            top = max((v for k, v in model if k == key), default=0)
            values = rng.sample(range(top - 3, top + 12), rng.randrange(1, 12))
            for v in values:
                ops[(key, v)] = 1
            if rng.random() < 0.3:  # a delete in the run: not all inserts
                ops[(key, rng.randrange(0, top + 1))] = -1
        assert_like_a_set_model(index, ops, present, model)

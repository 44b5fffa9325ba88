"""Map: projection/rename/constants; collisions add weights; upqueries translate keys."""

from __future__ import annotations

from collections import Counter

import pytest
from dataflow_harness import Driver, Store, epochs
from hypothesis import given, settings
from hypothesis import strategies as st

from pomoview.dataflow.operators.map import Column, Constant, Map
from pomoview.dataflow.zset import ZSet

SCHEMAS = {"r": ("a", "b")}
SETTINGS = settings(max_examples=60, deadline=None)

# name -> (outputs, the output columns a partial source keyed by r.a is queried through)
SHAPES = {
    "swap": ([Column(1), Column(0)], (1,)),
    "rename": ([Column(0), Column(1)], (0,)),  # every column in order: deltas pass as they are
    "project-a": ([Column(0)], (0,)),  # collisions: weights count the b's
    "project-b": ([Column(1)], ()),  # onto a column that is not the source's key
    "const-a": ([Constant(7), Column(0), Column(0)], (1,)),
    "const-a-dup-key": ([Constant(7), Column(0), Column(0)], (1, 2)),
    "const-key": ([Constant(7), Column(0)], (0, 1)),
}


def make_reference(outputs: list):
    def reference(store: Store) -> ZSet:
        def apply(row: tuple) -> tuple:
            return tuple(o.value if isinstance(o, Constant) else row[o.index] for o in outputs)

        return ZSet(Counter(apply(row) for row in store.data["r"]))

    return reference


@pytest.mark.parametrize("shape", sorted(SHAPES))
@SETTINGS
@given(history=epochs(("r",)))
def test_full(shape: str, history: list) -> None:
    outputs, _ = SHAPES[shape]
    store = Store(SCHEMAS)
    store.apply(history[0][0])
    node = Map(store.index("r", (), False), tuple(f"c{i}" for i in range(len(outputs))), outputs)
    driver = Driver(store, node, make_reference(outputs))
    for batch, _ in history[1:]:
        driver.step(batch)
        driver.check()


@pytest.mark.parametrize("column", [0, 1])
@SETTINGS
@given(
    delta=st.dictionaries(
        st.tuples(st.integers(0, 3), st.integers(0, 3)), st.integers(-2, 2).filter(bool), max_size=12
    )
)
def test_one_column_delta_equals_the_map_of_each_row(column: int, delta: dict) -> None:
    """A projection onto one column sums the weights that meet and keeps no zero weight, as
    the map of each row does (map_zset with `apply`)."""
    node = Map(Store(SCHEMAS).index("r", (), False), ("c",), [Column(column)])
    out = node.on_delta(0, ZSet(delta))
    assert out == ZSet(delta).map(node.apply)
    assert all(weight for _, weight in out.items())


@pytest.mark.parametrize("shape", sorted(s for s in SHAPES if SHAPES[s][1]))
@SETTINGS
@given(history=epochs(("r",)))
def test_partial_source_below(shape: str, history: list) -> None:
    outputs, key_cols = SHAPES[shape]
    store = Store(SCHEMAS)
    store.apply(history[0][0])
    node = Map(store.index("r", (0,), True), tuple(f"c{i}" for i in range(len(outputs))), outputs)
    driver = Driver(store, node, make_reference(outputs), key_cols=key_cols)
    for batch, lookups in history[1:]:
        driver.step(batch)
        # widen each looked-up value to the key's arity (constants take 7 or a miss value)
        keys = []
        for (v,) in lookups:
            key = tuple((7 if v % 2 == 0 else v) if isinstance(outputs[c], Constant) else v for c in key_cols)
            keys.append(key)
        driver.fill(keys)
        driver.check()


def test_constant_key_mismatch_asks_nothing() -> None:
    store = Store(SCHEMAS)
    store.data["r"].add((1, 2))
    node = Map(store.index("r", (0,), True), ("k", "a"), [Constant(7), Column(0)])
    assert node.query((0, 1), [(8, 1)]) == ZSet()
    assert store.fetches == []
    assert node.query((0, 1), [(7, 1)]) == ZSet({(7, 1): 1})
    assert node.translate((0, 1)) == (0,)

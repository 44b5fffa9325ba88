"""AntiJoin: left rows with no matching right row, full and partial, against from scratch."""

from __future__ import annotations

import pytest
from dataflow_harness import Driver, Store, epochs, touches_missing
from hypothesis import given, settings
from hypothesis import strategies as st

from pomoview.dataflow.node import Node
from pomoview.dataflow.operators.antijoin import AntiJoin, antijoin
from pomoview.dataflow.operators.map import Column, Map
from pomoview.dataflow.zset import ZSet

SCHEMAS = {"r": ("a", "b"), "s": ("b", "c")}
SETTINGS = settings(max_examples=60, deadline=None)

# (left key cols, right key cols): r.b ∉ s.b; r.a ∉ s.b; (r.a, r.b) ∉ (s.b, s.c); s empty.
LAYOUTS = {
    "b=b": ((1,), (0,)),
    "a=b": ((0,), (0,)),
    "ab=bc": ((0, 1), (0, 1)),
    "nothing": ((), ()),
}


def make_reference(lk: tuple[int, ...], rk: tuple[int, ...]):
    """Plain Python: r's tuples whose key is not the key of any s tuple."""

    def reference(store: Store) -> ZSet:
        taken = {tuple(row[i] for i in rk) for row in store.data["s"]}
        return ZSet({row: 1 for row in store.data["r"] if tuple(row[i] for i in lk) not in taken})

    return reference


def right_input(
    store: Store, rk: tuple[int, ...], partial: bool, projected: bool
) -> tuple[Node, tuple[int, ...]]:
    """s, or (as lowering does for `!s(b: B)`) its projection on the key: a bag."""
    index = store.index("s", rk if partial else (), partial)
    if not projected:
        return index, rk
    return Map(index, tuple(SCHEMAS["s"][i] for i in rk), [Column(i) for i in rk]), tuple(range(len(rk)))


def reaches_missing(
    store: Store, batch: dict, lk: tuple[int, ...], rk: tuple[int, ...], projected: bool, filled: dict
) -> bool:
    """Whether a change that reaches the antijoin (full sources pass only real changes, and a
    projection adds up the changes that meet on one row) is at a key that is not filled."""
    reaching: dict[str, ZSet] = {"r": ZSet(), "s": ZSet()}
    for src, ops in batch.items():
        for row, op in ops.items():
            if (row in store.data[src]) != (op > 0):  # the op changes the set
                cols = lk if src == "r" else rk
                reaching[src].add(tuple(row[i] for i in cols) if src == "s" and projected else row, op)
    for src, delta in reaching.items():
        cols = lk if src == "r" else (tuple(range(len(rk))) if projected else rk)
        if any(tuple(row[i] for i in cols) not in filled for row in delta.elements()):
            return True
    return False


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("projected", [False, True], ids=["whole", "projected"])
@SETTINGS
@given(history=epochs(("r", "s")))
def test_full_antijoin(layout: str, projected: bool, history: list) -> None:
    lk, rk = LAYOUTS[layout]
    store = Store(SCHEMAS)
    store.apply(history[0][0])
    right, right_keys = right_input(store, rk, False, projected)
    node = AntiJoin(store.index("r", (), False), right, lk, right_keys, partial=False)
    driver = Driver(store, node, make_reference(lk, rk))
    driver.check()
    for batch, _ in history[1:]:
        driver.step(batch)
        driver.check()
    assert driver.dropped == 0


@pytest.mark.parametrize("layout", ["b=b", "a=b", "ab=bc"])
@pytest.mark.parametrize("partial_sources", [True, False], ids=["partial-src", "full-src"])
@pytest.mark.parametrize("projected", [False, True], ids=["whole", "projected"])
@SETTINGS
@given(history=epochs(("r", "s")), data=st.data())
def test_partial_antijoin(
    layout: str, partial_sources: bool, projected: bool, history: list, data: st.DataObject
) -> None:
    """Upqueries fill a key on both sides; deltas at missing keys are dropped; filled keys
    stay equal to the reference after every epoch, both as deltas and as upquery answers."""
    lk, rk = LAYOUTS[layout]
    store = Store(SCHEMAS)
    store.apply(history[0][0])
    left = store.index("r", lk if partial_sources else (), partial_sources)
    right, right_keys = right_input(store, rk, partial_sources, projected)
    node = AntiJoin(left, right, lk, right_keys, partial=True)
    driver = Driver(store, node, make_reference(lk, rk), key_cols=lk)
    key = st.tuples(*[st.integers(0, 2)] * len(lk))
    driver.fill(data.draw(st.lists(key, max_size=2)))
    driver.check()
    for batch, _ in history[1:]:
        dropped = driver.dropped
        if partial_sources:
            expect_drop = touches_missing(batch, {"r": lk, "s": rk}, driver.filled)
        else:
            expect_drop = reaches_missing(store, batch, lk, rk, projected, driver.filled)
        driver.step(batch)
        assert (driver.dropped > dropped) == expect_drop
        driver.fill(data.draw(st.lists(key, max_size=2)))
        driver.check()


def test_right_side_flips() -> None:
    """A key's left rows go when its first right row comes, and come back with its last."""
    store = Store(SCHEMAS)
    store.data["r"] |= {(1, 2), (3, 2), (4, 5)}
    node = AntiJoin(store.index("r", (), False), store.index("s", (), False), (1,), (0,), partial=False)
    driver = Driver(store, node, make_reference((1,), (0,)))
    assert driver.total == ZSet({(1, 2): 1, (3, 2): 1, (4, 5): 1})
    driver.step({"s": {(2, 0): 1, (2, 1): 1}})
    assert driver.sink.deltas == [ZSet({(1, 2): -1, (3, 2): -1})]
    driver.step({"s": {(2, 0): -1}})  # one right row is left: nothing changes
    assert driver.sink.deltas == []
    driver.step({"s": {(2, 1): -1}, "r": {(7, 2): 1}})
    driver.check()
    assert driver.total == ZSet({(1, 2): 1, (3, 2): 1, (4, 5): 1, (7, 2): 1})


def test_reference_operator() -> None:
    left = ZSet({(1, 2): 2, (3, 4): 1})
    right = ZSet({(2,): 1, (4,): -1})  # a non-positive weight is not a match
    assert antijoin(left, right, (1,), (0,)) == ZSet({(3, 4): 1})

"""Join: bilinear incremental join, full and partial, against a from-scratch join."""

from __future__ import annotations

import pytest
from dataflow_harness import Driver, Store, epochs, touches_missing
from hypothesis import given, settings
from hypothesis import strategies as st

from pomoview.dataflow.operators.join import Join
from pomoview.dataflow.zset import ZSet

SCHEMAS = {"r": ("a", "b"), "s": ("b", "c")}
SETTINGS = settings(max_examples=60, deadline=None)

# (left key cols, right key cols): r.b = s.b; r.a = s.b; (r.a, r.b) = (s.b, s.c); product.
LAYOUTS = {
    "b=b": ((1,), (0,)),
    "a=b": ((0,), (0,)),
    "ab=bc": ((0, 1), (0, 1)),
    "product": ((), ()),
}


def make_reference(lk: tuple[int, ...], rk: tuple[int, ...]):
    rest = tuple(i for i in range(2) if i not in rk)

    def reference(store: Store) -> ZSet:
        out: ZSet = ZSet()
        for left in store.data["r"]:
            for right in store.data["s"]:
                if tuple(left[i] for i in lk) == tuple(right[i] for i in rk):
                    out.add(left + tuple(right[i] for i in rest), 1)
        return out

    return reference


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@SETTINGS
@given(history=epochs(("r", "s")))
def test_full_join(layout: str, history: list) -> None:
    lk, rk = LAYOUTS[layout]
    store = Store(SCHEMAS)
    store.apply(history[0][0])
    join = Join(store.index("r", (), False), store.index("s", (), False), lk, rk, partial=False)
    driver = Driver(store, join, make_reference(lk, rk))
    driver.check()
    for batch, _ in history[1:]:
        driver.step(batch)
        driver.check()
    assert driver.dropped == 0


@pytest.mark.parametrize("layout", ["b=b", "a=b", "ab=bc"])
@pytest.mark.parametrize("partial_sources", [True, False], ids=["partial-src", "full-src"])
@SETTINGS
@given(history=epochs(("r", "s")), data=st.data())
def test_partial_join(layout: str, partial_sources: bool, history: list, data: st.DataObject) -> None:
    lk, rk = LAYOUTS[layout]
    store = Store(SCHEMAS)
    store.apply(history[0][0])
    left = store.index("r", lk if partial_sources else (), partial_sources)
    right = store.index("s", rk if partial_sources else (), partial_sources)
    join = Join(left, right, lk, rk, partial=True)
    driver = Driver(store, join, make_reference(lk, rk), key_cols=lk)
    key = st.tuples(*[st.integers(0, 2)] * len(lk))
    for batch, _ in history[1:]:
        dropped = driver.dropped
        if partial_sources:
            expect_drop = touches_missing(batch, {"r": lk, "s": rk}, driver.filled)
        else:  # only real changes reach the join; drop iff one is at a missing key
            expect_drop = any(
                tuple(row[i] for i in (lk if src == "r" else rk)) not in driver.filled
                and ((row in store.data[src]) != (op > 0))  # the op changes the set
                for src, ops in batch.items()
                for row, op in ops.items()
            )
        driver.step(batch)
        assert (driver.dropped > dropped) == expect_drop
        driver.fill(data.draw(st.lists(key, max_size=2)))
        driver.check()


def test_product_and_weights() -> None:
    store = Store(SCHEMAS)
    store.data["r"] |= {(1, 1)}
    join = Join(store.index("r", (), False), store.index("s", (), False), (), (), partial=False)
    driver = Driver(store, join, make_reference((), ()))
    driver.step({"s": {(5, 6): 1, (7, 8): 1}})
    assert driver.total == ZSet({(1, 1, 5, 6): 1, (1, 1, 7, 8): 1})
    # both sides change in one step: d(L⋈R) = dL⋈R + L'⋈dR, no double counting
    driver.step({"r": {(2, 2): 1}, "s": {(9, 9): 1, (5, 6): -1}})
    driver.check()
    assert join.schema == ("a", "b", "b", "c")

"""TopK (the reader of an ordered view) against the reference: each key's rows from scratch,
sorted by the order and cut at the limit, after random writes, lookups and evictions."""

from __future__ import annotations

import pytest
from dataflow_harness import Store
from hypothesis import given, settings
from hypothesis import strategies as st

from pomoview.dataflow.circuit import Circuit
from pomoview.dataflow.operators.top_k import TopK, sort_key
from pomoview.dataflow.operators.union import Union
from pomoview.dataflow.state.keyed_state import Row
from pomoview.dataflow.zset import ZSet

SCHEMA = {"r": ("k", "score", "id")}
# (column, descending): score desc, then id asc; score asc alone; id desc alone.
ORDERS = [((1, True), (2, False)), ((1, False),), ((2, True),)]
KEYS = 3
SETTINGS = settings(max_examples=80, deadline=None)

row_st = st.tuples(st.integers(0, KEYS - 1), st.integers(0, 3), st.integers(0, 9))
# One action: a write (rows with +1/-1), a lookup of some keys, or an eviction of some keys.
action_st = st.one_of(
    st.tuples(st.just("write"), st.dictionaries(row_st, st.sampled_from((1, -1)), max_size=6)),
    st.tuples(st.just("lookup"), st.lists(st.integers(0, KEYS - 1), min_size=1, max_size=3)),
    st.tuples(st.just("evict"), st.lists(st.integers(0, KEYS - 1), min_size=1, max_size=2)),
)


def expected(store: Store, key: int, order: tuple, limit: int | None) -> list[Row]:
    """The key's rows sorted by `order` (ties by the whole row), first `limit`: from scratch,
    with a comparison written apart from the operator's (a sort per column, last first)."""
    rows = sorted(r for r in store.data["r"] if r[0] == key)  # the tie break: whole row ascending
    for column, descending in reversed(order):
        rows.sort(key=lambda r, c=column: r[c], reverse=descending)  # stable: earlier columns win
    return rows if limit is None else rows[:limit]


def build(store: Store, order: tuple, limit: int | None, partial: bool) -> tuple[Circuit, TopK]:
    source = store.index("r", (0,) if partial else (), partial)
    top = TopK(source, (0,), partial=partial, order=order, limit=limit)
    circuit = Circuit(top)
    circuit.hydrate()
    return circuit, top


def apply(store: Store, ops: dict[Row, int]) -> dict[str, ZSet[Row]]:
    """The ops that change the set (an insert of a present row or a delete of an absent one
    is no change), applied to the store."""
    real = {r: w for r, w in ops.items() if (w > 0) != (r in store.data["r"])}
    return store.apply({"r": real})


@pytest.mark.parametrize("partial", [True, False])
@pytest.mark.parametrize("limit", [1, 2, None])
@pytest.mark.parametrize("order", ORDERS)
@SETTINGS
@given(initial=st.sets(row_st, max_size=12), actions=st.lists(action_st, max_size=12))
def test_windows_match_sorted_rows_from_scratch(
    order: tuple, limit: int | None, partial: bool, initial: set, actions: list
) -> None:
    store = Store(SCHEMA)
    store.apply({"r": dict.fromkeys(initial, 1)})
    circuit, top = build(store, order, limit, partial)
    for kind, arg in actions:
        if kind == "write":
            circuit.step(apply(store, arg))
        elif kind == "lookup":
            keys = [(k,) for k in arg]
            answers = circuit.lookup(keys)
            for (k,), rows in zip(keys, answers, strict=True):
                assert rows == expected(store, k, order, limit), (k, rows)
        elif partial:
            top.evict_own([(k,) for k in arg])
        if top.windowed:
            for key in top.state.keys():  # the goal: at most `limit` rows per present key
                assert len(top.state.get(key) or {}) <= (limit or 0), key
    for k in range(KEYS):  # and every key, at the end
        assert circuit.lookup([(k,)])[0] == expected(store, k, order, limit)


def test_a_delete_in_a_cut_window_pulls_the_next_rows_from_the_state_above() -> None:
    store = Store(SCHEMA)
    store.apply({"r": {(0, s, s): 1 for s in range(5)}})
    circuit, top = build(store, ((1, True),), 2, partial=True)
    assert circuit.lookup([(0,)]) == [[(0, 4, 4), (0, 3, 3)]]
    assert len(top.state.get((0,)) or {}) == 2 and (0,) in top.cut
    fetches = len(store.fetches)
    circuit.step(apply(store, {(0, 3, 3): -1}))  # inside the window: only above can refill
    assert top.refills == 1 and set(top.state.get((0,)) or {}) == {(0, 4, 4), (0, 2, 2)}
    assert len(store.fetches) == fetches  # pulled from the source index, which holds the key
    circuit.step(apply(store, {(0, 0, 0): -1, (0, 9, 9): 1}))  # past the bound, and a new top
    assert top.refills == 1
    assert circuit.lookup([(0,)]) == [[(0, 9, 9), (0, 4, 4)]]


def test_a_refill_the_states_above_cannot_answer_evicts_the_key_and_fetches_nothing() -> None:
    store = Store({"r": SCHEMA["r"], "s": SCHEMA["r"]})
    store.apply({"r": {(0, s, s): 1 for s in range(5)}, "s": {(0, 7, 7): 1}})
    r, other = store.index("r", (0,), True), store.index("s", (0,), True)
    top = TopK(Union((r, other)), (0,), partial=True, order=((1, True),), limit=2)
    circuit = Circuit(top)
    circuit.hydrate()
    assert circuit.lookup([(0,)]) == [[(0, 7, 7), (0, 4, 4)]]
    other.state.evict((0,))  # one state above lost the key (as a join's other side may)
    fetches = len(store.fetches)
    circuit.step(store.apply({"r": {(0, 4, 4): -1}}))
    assert top.state.get((0,)) is None and top.refills == 1
    assert len(store.fetches) == fetches and other.state.get((0,)) is None  # no fetch mid-step
    assert circuit.lookup([(0,)]) == [[(0, 7, 7), (0, 3, 3)]]  # the next lookup fills it


class Changes:
    """A tap that keeps the changes it is handed."""

    def __init__(self) -> None:
        self.seen: list[tuple[Row, int]] = []

    def capture(self, changes: list[tuple[Row, int]]) -> None:
        self.seen += changes


@SETTINGS
@given(
    initial=st.sets(row_st, max_size=12),
    writes=st.lists(st.dictionaries(row_st, st.sampled_from((1, -1)), max_size=6), max_size=10),
)
def test_taps_see_the_window_change_as_the_model(initial: set, writes: list) -> None:
    store = Store(SCHEMA)
    store.apply({"r": dict.fromkeys(initial, 1)})
    order = ((1, True), (2, False))
    circuit, top = build(store, order, 2, partial=True)
    [rows] = circuit.lookup([(0,)])
    tap = Changes()
    top.tap([(0,)], tap)
    held = dict.fromkeys(rows, 1)
    for ops in writes:
        circuit.step(apply(store, ops))
        for row, weight in tap.seen:
            held[row] = held.get(row, 0) + weight
            if not held[row]:
                del held[row]
        tap.seen.clear()
        assert sorted(held, key=sort_key(order)) == expected(store, 0, order, 2)


def test_descending_strings_and_the_tie_break() -> None:
    key = sort_key(((1, True),))
    rows = [(0, "b", 2), (0, "a", 1), (0, "b", 1), (0, "c", 0)]
    assert sorted(rows, key=key) == [(0, "c", 0), (0, "b", 1), (0, "b", 2), (0, "a", 1)]


def test_an_insert_that_pushes_a_row_out_cuts_the_window() -> None:
    store = Store(SCHEMA)
    store.apply({"r": {(0, 1, 1): 1, (0, 2, 2): 1}})
    circuit, top = build(store, ((1, True),), 2, partial=True)
    assert circuit.lookup([(0,)]) == [[(0, 2, 2), (0, 1, 1)]]
    assert (0,) not in top.cut  # every row of the key is held
    circuit.step(apply(store, {(0, 3, 3): 1}))  # (0, 1, 1) leaves the window
    assert (0,) in top.cut and len(top.state.get((0,)) or {}) == 2
    circuit.step(apply(store, {(0, 3, 3): -1}))
    assert circuit.lookup([(0,)]) == [[(0, 2, 2), (0, 1, 1)]]


def test_a_row_moving_within_a_cut_window_needs_no_refill_and_one_moving_past_it_does() -> None:
    store = Store(SCHEMA)
    store.apply({"r": {(0, s, s): 1 for s in range(5)}})
    circuit, top = build(store, ((1, True),), 2, partial=True)
    assert circuit.lookup([(0,)]) == [[(0, 4, 4), (0, 3, 3)]]
    circuit.step(apply(store, {(0, 3, 3): -1, (0, 5, 3): 1}))  # a vote: it moves up
    assert top.refills == 0 and set(top.state.get((0,)) or {}) == {(0, 5, 3), (0, 4, 4)}
    circuit.step(apply(store, {(0, 4, 4): -1, (0, 1, 4): 1}))  # it falls past the bound
    assert top.refills == 1 and set(top.state.get((0,)) or {}) == {(0, 5, 3), (0, 2, 2)}
    assert circuit.lookup([(0,)]) == [[(0, 5, 3), (0, 2, 2)]]

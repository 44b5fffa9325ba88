"""Packed groups (IntSet, and KeyedState with a RowLayout) against plain Python: a set of
ints for IntSet, and the same KeyedState without a layout (the dict form, the reference)
for random fills, weighted adds (weights that leave the set form, values that are not
64-bit ints) and evictions."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pomoview.dataflow.state.int_set import IntSet
from pomoview.dataflow.state.keyed_state import PACK_MIN, KeyedState, PackedGroup, RowLayout

VALUES = st.one_of(st.integers(-40, 40), st.sampled_from([(1 << 63) - 1, -(1 << 63)]))


@settings(max_examples=200, deadline=None)
@given(st.lists(VALUES, max_size=60), st.lists(st.tuples(st.booleans(), VALUES), max_size=400))
def test_an_int_set_is_a_set(initial: list[int], steps: list[tuple[bool, int]]) -> None:
    model = set(initial)
    packed = IntSet(initial)
    for add, value in steps:
        if add and value not in model:
            model.add(value)
            packed.add(value)
        elif not add and value in model:
            model.discard(value)
            packed.discard(value)
        packed.check()
        assert len(packed) == len(model)
        assert (value in packed) == (value in model)
    assert sorted(packed) == sorted(model)
    assert (1 << 64) not in packed and "1" not in packed


def test_of_unique_refuses_a_multiset() -> None:
    assert IntSet.of_unique([1, 2, 2]) is None
    got = IntSet.of_unique([3, 1, 2])
    assert got is not None and sorted(got) == [1, 2, 3]


KEYS = st.integers(0, 3)
ROW_VALUES = st.one_of(st.integers(0, 30), st.just(1 << 70), st.just("text"), st.just(True))


def snapshot(state: KeyedState) -> dict[Any, dict[Any, int]]:
    return {key: dict(group.items()) for key, group in state.groups()}


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("fill"), KEYS, st.lists(ROW_VALUES, max_size=3 * PACK_MIN)),
            st.tuples(st.just("add"), KEYS, ROW_VALUES, st.sampled_from([1, 1, 1, -1, -1, 2])),
            st.tuples(st.just("evict"), KEYS),
        ),
        max_size=120,
    ),
    st.booleans(),
)
def test_a_state_with_a_layout_answers_like_one_without(steps: list[Any], key_first: bool) -> None:
    # Rows (key, value) or (value, key): the key at either position.
    key_cols = (0,) if key_first else (1,)
    packed = KeyedState(partial=True, layout=RowLayout(key_cols, 2))
    plain = KeyedState(partial=True)
    saw_packed = False

    def row(key: int, value: object) -> tuple[object, ...]:
        return (key, value) if key_first else (value, key)

    for step in steps:
        if step[0] == "fill":
            _, key, values = step
            if plain.get((key,)) is None:
                rows = [(row(key, v), 1) for v in values]
                plain.fill((key,), rows)
                packed.fill((key,), rows)
        elif step[0] == "add":
            _, key, value, weight = step
            assert plain.add((key,), row(key, value), weight) == packed.add((key,), row(key, value), weight)
        else:
            assert plain.evict((step[1],)) == packed.evict((step[1],))
        assert snapshot(packed) == snapshot(plain)
        assert packed.row_count() == plain.row_count()
        packed.check()
        plain.check()
        for key in range(4):
            group, reference = packed.get((key,)), plain.get((key,))
            assert (group is None) == (reference is None)
            if group is not None and reference is not None:
                saw_packed |= isinstance(group, PackedGroup)
                assert len(group) == len(reference)
                for value in (0, 5, 1 << 70, "text"):
                    r = row(key, value)
                    assert group.get(r, 0) == reference.get(r, 0)
                    assert (r in group) == (r in reference)
                assert group.get(row(key + 1, 0), 0) == 0, "a row of another key is not held"
    del saw_packed  # not every example packs; the next test makes sure some do


def test_a_large_group_of_ints_is_packed_and_stays_exact_under_writes() -> None:
    state = KeyedState(partial=True, layout=RowLayout((0,), 2))
    state.fill((1,), [((1, u), 1) for u in range(1000)])
    group = state.get((1,))
    assert isinstance(group, PackedGroup)
    assert state.estimate_bytes() < 20 * 1000, "about 8 bytes a row, not a dict of tuples"
    for u in range(0, 1000, 2):
        assert state.add((1,), (1, u), -1)
    for u in range(1000, 1100):
        assert state.add((1,), (1, u), 1)
    expected = {(1, u) for u in range(1, 1000, 2)} | {(1, u) for u in range(1000, 1100)}
    assert set(state.get((1,)) or {}) == expected
    assert state.row_count() == len(expected)
    assert isinstance(state.get((1,)), PackedGroup)
    # A weight the set form cannot hold turns the group back into a dict, exactly.
    assert state.add((1,), (1, 1001), 1)
    got = state.get((1,))
    assert got is not None and not isinstance(got, PackedGroup) and got[(1, 1001)] == 2


@settings(max_examples=200, deadline=None)
@given(
    st.lists(VALUES, max_size=80),
    st.lists(st.lists(st.tuples(st.booleans(), VALUES), max_size=60), max_size=12),
)
def test_an_int_set_takes_batches_like_one_value_at_a_time(
    initial: list[int], batches: list[list[tuple[bool, int]]]
) -> None:
    """contains_many, add_many and discard_many against a plain set (batches large enough to
    make the pending sets merge, and small ones that leave them pending)."""
    model = set(initial)
    packed = IntSet(initial)
    for batch in batches:
        values = list(dict.fromkeys(v for _, v in batch))
        array = np.array(values, dtype=np.int64)
        assert packed.contains_many(array).tolist() == [v in model for v in values]
        # contains_each's shortcut past the largest value held: the values just above it,
        # at it and below it too.
        top = max(packed.base.tolist(), default=0)
        near = values + [top - 1, top, top + 1]
        assert packed.contains_each(near) == [v in model for v in near]
        inserting = {v for add, v in batch if add}
        adds = [v for v in values if v in inserting and v not in model]
        removes = [v for v in values if v not in inserting and v in model]
        packed.add_many(adds)
        packed.discard_many(removes)
        model |= set(adds)
        model -= set(removes)
        packed.check()
        assert len(packed) == len(model)
    assert sorted(packed) == sorted(model)


PACKED_VALUES = st.one_of(st.integers(0, 200), st.just(1 << 70))  # the last cannot be packed


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 200), min_size=PACK_MIN, max_size=60, unique=True),
    st.lists(
        st.lists(st.tuples(PACKED_VALUES, st.sampled_from([1, -1])), max_size=40),
        max_size=8,
    ),
    st.booleans(),
)
def test_set_presence_on_a_packed_group_is_the_row_by_row_operations(
    initial: list[int], batches: list[list[tuple[int, int]]], key_first: bool
) -> None:
    """A source index's batch path (KeyedState.set_presence: one membership test for the
    whole batch on a packed group, or the rows one by one below PACKED_BATCH_MIN and for a
    value that cannot be packed) against a plain set of rows per key."""
    layout = RowLayout((0,) if key_first else (1,), 2)
    state = KeyedState(partial=True, layout=layout)
    key = (7,)
    state.fill(key, [(layout.row(key, v), 1) for v in initial])
    model = {layout.row(key, v) for v in initial}
    assert snapshot(state)[key] == dict.fromkeys(model, 1)
    for batch in batches:
        ops = list({layout.row(key, v): op for v, op in batch}.items())  # distinct rows
        expected = []
        for row, op in ops:
            if op > 0 and row not in model:
                expected.append((row, 1))
            elif op < 0 and row in model:
                expected.append((row, -1))
        got = state.set_presence(key, ops)
        assert got is not None and sorted(got, key=repr) == sorted(expected, key=repr)
        model |= {row for row, sign in expected if sign > 0}
        model -= {row for row, sign in expected if sign < 0}
        state.check()
        assert snapshot(state).get(key, {}) == dict.fromkeys(model, 1)
    assert state.set_presence((8,), [(layout.row((8,), 1), 1)]) is None
    assert state.row_count() == len(model)


def test_a_batch_at_a_hot_key_takes_the_vectorized_path() -> None:
    """The sizes the batch path is for: a packed group of 1,000 values and a batch of 600
    ops, half on present values (even), half on absent ones (odd)."""
    layout = RowLayout((0,), 2)
    state = KeyedState(partial=True, layout=layout)
    state.fill((1,), [((1, v), 1) for v in range(0, 2000, 2)])
    ops = [((1, v), 1 if v % 3 else -1) for v in range(600)]
    got = dict(state.set_presence((1,), ops) or [])
    # Present and deleted (-1), absent and inserted (+1); the rest change nothing.
    expected = {(1, v): -1 for v in range(0, 600, 2) if v % 3 == 0}
    expected |= {(1, v): 1 for v in range(1, 600, 2) if v % 3}
    assert got == expected
    assert state.row_count() == 1000 + sum(expected.values())
    state.check()


ROWS = st.sampled_from([(1, v) for v in range(4)])


@settings(max_examples=200, deadline=None)
@given(st.booleans(), st.lists(st.tuples(st.integers(0, 2), ROWS, ROWS, st.integers(0, 4)), max_size=60))
def test_replace_is_a_copy_on_write_dict_update(
    partial: bool, steps: list[tuple[int, Any, Any, int]]
) -> None:
    """`replace` against a dict model, with changes mostly of the shape a reader gets under
    writes, one row giving way to another ([(old, -1), (new, +1)]), and the others: a row
    that is not the key's (weights leave {1}), the same row out and in, a weight of 2, three
    changes. Every
    group read before a replace still reads as it did (copy on write)."""
    state = KeyedState(partial=partial)
    model: dict[tuple[int, ...], dict[Any, int]] = {}
    for key_no, first, second, shape in steps:
        key = (key_no,)
        if partial and key not in model:
            state.fill(key, [(first, 1)])
            model[key] = {first: 1}
            continue
        held = model.get(key, {})
        current = next(iter(held), first) if len(held) == 1 else first
        changes = [
            [(current, -1), (second, 1)],  # the reader's common shape
            [(first, -1), (second, 1)],  # the old row may not be the key's
            [(current, -1), (current, 1)],  # out and in again: no change
            [(current, -1), (second, 1), (first, 1)],
            [(current, -1), (second, 2)],
        ][shape]
        if len({row for row, _ in changes}) < len(changes) and shape != 2:
            changes = changes[:1]  # a row once per change list, as a reader's grouping gives
        before = {k: dict(v) for k, v in state.groups()}
        views = {k: state.get(k) for k in model}
        assert state.replace(key, changes)
        counts = Counter(held)
        for row, weight in changes:
            counts[row] += weight
        new = {row: weight for row, weight in counts.items() if weight}
        if new or partial:
            model[key] = new
        else:
            model.pop(key, None)
        for k, view in views.items():
            assert view is None or dict(view) == before.get(k, {}), f"{k} changed under a reader"
        assert {k: dict(v) for k, v in state.groups()} == {k: v for k, v in model.items() if v or partial}
        state.check()
    if partial:  # a key never filled stays missing
        for key in {(k,) for k in range(3)} - set(model):
            assert not state.replace(key, [((1, 0), 1)])
